"""The warehouse on object storage: the Hadoop S3A connector for `warehouse.root: s3a://bucket/prefix`
(docs/warehouse.md §2).

`spark_config(config)` is the `spark` section the daemon starts Spark with: for an s3a:// root, the
`spark.conf` the config gives on top of the S3A settings below (`s3a_conf`), and the connector's jars
asked for beside Delta's, cached with them (warehouse.lake.session: `freshet.jars.packages`).

The jars are `org.apache.hadoop:hadoop-aws` at the version of the Hadoop client pyspark ships
(`pyspark/jars/hadoop-client-api-<v>.jar`) and the AWS SDK v2 modules it calls — `s3`,
`s3-transfer-manager`, `sts` (web-identity credentials) — at the SDK version that Hadoop release was
built against, instead of the SDK's shaded `bundle` hadoop-aws names (686 MB; the modules: ~15 MB).
The SDK's own dependencies that Spark already ships (Netty, SLF4J, Apache HttpClient, commons-codec,
commons-logging) are left out: Spark's copies are the ones loaded anyway.

Delta Lake commits to an s3a:// table through its S3 single-driver log store (its default for s3a):
atomic only among the commits of one Spark driver — one daemon per warehouse (ops.lease).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from warehouse.config import FreshetConfig, S3Settings, SparkConfig
from warehouse.config_storage import landing_on_s3
from warehouse.errors import ConfigError, WarehouseError

__all__ = ["AWS_SDK", "S3A_EXCLUDES", "hadoop_version", "is_s3a", "s3_client", "s3_status", "s3a_conf", "s3a_packages",
           "spark_config"]

# The AWS SDK v2 version each Hadoop release's hadoop-aws was built and tested with
# (hadoop-project's `aws-java-sdk-v2.version`).
AWS_SDK = {"3.5.0": "2.35.4", "3.4.3": "2.35.4", "3.4.2": "2.29.52", "3.4.1": "2.24.6"}
SDK_MODULES = ("s3", "s3-transfer-manager", "sts")
# Left out of the resolution: the shaded SDK (the modules above replace it) and what Spark ships.
S3A_EXCLUDES = (
    "software.amazon.awssdk:bundle",
    *(f"io.netty:netty-{m}" for m in ("buffer", "codec", "codec-http", "codec-http2", "common", "handler",
                                       "resolver", "transport", "transport-classes-epoll",
                                       "transport-native-unix-common")),
    "org.slf4j:slf4j-api", "commons-codec:commons-codec", "commons-logging:commons-logging",
    "org.apache.httpcomponents:httpclient", "org.apache.httpcomponents:httpcore",
)
ENV_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
DEFAULT_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def is_s3a(root: str) -> bool:
    """`s3a://bucket/prefix`: Spark reaches the root through the S3A connector."""
    return root.lower().startswith("s3a://")


def hadoop_version() -> str:
    """The Hadoop client pyspark ships (`jars/hadoop-client-api-<v>.jar`)."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        raise WarehouseError("no hadoop-client-api jar in pyspark's jars: cannot tell which hadoop-aws to use")
    return jars[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def s3a_packages(hadoop: str | None = None) -> str:
    """The Maven coordinates of the S3A connector matching `hadoop` (default: pyspark's), comma-separated."""
    hadoop = hadoop or hadoop_version()
    sdk = AWS_SDK.get(hadoop)
    if sdk is None:
        raise WarehouseError(f"no AWS SDK version known for Hadoop {hadoop} (known: {', '.join(AWS_SDK)}): "
                             f"add it to warehouse.lake.s3a.AWS_SDK from hadoop-project's pom")
    return ",".join([f"org.apache.hadoop:hadoop-aws:{hadoop}",
                     *(f"software.amazon.awssdk:{m}:{sdk}" for m in SDK_MODULES)])


def s3a_conf(s3: S3Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `spark.hadoop.fs.s3a.*` settings for `s3` (raises ConfigError naming the variable when
    `credentials: env` and the environment lacks it). The credentials themselves never pass
    through Spark's configuration: the provider reads them in the driver JVM, which inherits
    this process's environment."""
    environ = os.environ if environ is None else environ
    if s3.credentials == "env":
        missing = [k for k in ENV_KEYS if not environ.get(k)]
        if missing:
            raise ConfigError(f"warehouse.s3.credentials is env, but {' and '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} not set in the daemon's environment")
    hadoop = "spark.hadoop.fs.s3a."
    conf = {
        hadoop + "aws.credentials.provider": ENV_PROVIDER if s3.credentials == "env" else DEFAULT_PROVIDER,
        hadoop + "path.style.access": "true" if s3.path_style else "false",
        # Hadoop 3.4.3+ may read through the analytics accelerator stream, which caches per object
        # read; a daemon reads new objects for as long as it runs, and the classic stream is the
        # one Freshet is tested with
        hadoop + "input.stream.type": "classic",
        # a new file is created without S3A's HEAD and LIST probes for an object or a directory at its
        # path: Delta names every data file uniquely, and its single-driver log store checks that a
        # commit file is absent itself before it writes one
        hadoop + "create.performance": "true",
    }
    if s3.endpoint is not None:
        conf[hadoop + "endpoint"] = s3.endpoint
        conf[hadoop + "connection.ssl.enabled"] = "true" if s3.endpoint.startswith("https:") else "false"
    region = s3.region or ("us-east-1" if s3.endpoint is not None else None)
    if region is not None:
        conf[hadoop + "endpoint.region"] = region
    return conf


def s3_client(s3: S3Settings, timeout: float, environ: Mapping[str, str] | None = None, *,
              attempts: int = 1) -> Any:
    """A boto3 S3 client with the credentials Spark's S3A gets (`warehouse.s3.credentials`: the
    environment, or the SDK's default chain), its endpoint, region and addressing; each request
    gives up within `timeout / 10` (at least 0.2 s, at most 5 s), `attempts` times. The lease
    (ops.lease_s3) makes one attempt, well inside the margin an owner keeps, so a hung request
    never delays the owner's own expiry; the landing zone (warehouse.landing.store_s3) retries."""
    import boto3
    from botocore.config import Config

    environ = os.environ if environ is None else environ
    creds: dict[str, str] = {}
    if s3.credentials == "env":
        missing = [k for k in ENV_KEYS if not environ.get(k)]
        if missing:
            raise ConfigError(f"warehouse.s3.credentials is env, but {' and '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} not set in the daemon's environment")
        creds = {"aws_access_key_id": environ["AWS_ACCESS_KEY_ID"],
                 "aws_secret_access_key": environ["AWS_SECRET_ACCESS_KEY"]}
        if environ.get("AWS_SESSION_TOKEN"):
            creds["aws_session_token"] = environ["AWS_SESSION_TOKEN"]
    wait = max(0.2, min(timeout / 10, 5.0))
    config = Config(connect_timeout=wait, read_timeout=wait, retries={"max_attempts": attempts, "mode": "standard"},
                    s3={"addressing_style": "path" if s3.path_style else "auto"})
    region = s3.region or ("us-east-1" if s3.endpoint is not None else None)
    return boto3.client("s3", endpoint_url=s3.endpoint, region_name=region, config=config, **creds)


def s3_status(err: Exception) -> int | None:
    """The HTTP status of a failed boto3 request (None: no answer, e.g. the endpoint unreachable)."""
    response = getattr(err, "response", None)
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None


def spark_config(config: FreshetConfig, environ: Mapping[str, str] | None = None) -> SparkConfig:
    """The `spark` section the daemon starts Spark with: for an s3a:// root or landing zone (whose
    files the base jobs read as s3a:// URIs), the S3A settings and
    jars under the config's own `spark.conf` (which wins); otherwise `config.spark` unchanged.
    Over Spark Connect (`spark.remote`) the server holds the connector: only the runtime
    settings are sent (warehouse.lake.session)."""
    if not is_s3a(config.warehouse.root) and not landing_on_s3(config.warehouse.landing):
        return config.spark
    conf = s3a_conf(config.warehouse.s3 or S3Settings(), environ)
    if config.spark.remote is None:
        conf["freshet.jars.packages"] = s3a_packages()
        conf["freshet.jars.excludes"] = ",".join(S3A_EXCLUDES)
    return config.spark.model_copy(update={"conf": {**conf, **config.spark.conf}})
