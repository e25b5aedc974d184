"""The shape of an OpenLineage run event (spec 2-0-2) that Freshet's events must have, written
here from the spec's documentation (openlineage.io/docs/spec): the required fields of a
RunEvent, its run, job and datasets, and of each standard facet Freshet emits. A test schema of
our own, not the project's schema files (no registry package ships them)."""

from __future__ import annotations

from typing import Any

URI = {"type": "string", "format": "uri"}
NAME = {"type": "string", "minLength": 1}


def facet(required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    """A facet: `_producer` and `_schemaURL` URIs, plus its own fields."""
    return {"type": "object", "required": ["_producer", "_schemaURL", *required],
            "properties": {"_producer": URI, "_schemaURL": URI, **props}}


DATASET = {"type": "object", "required": ["namespace", "name"],
           "properties": {"namespace": NAME, "name": NAME, "facets": {"type": "object"},
                          "inputFacets": {"type": "object"}, "outputFacets": {"type": "object"}}}

RUN_EVENT: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["eventTime", "producer", "schemaURL", "run", "job"],
    "properties": {
        "eventType": {"enum": ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]},
        "eventTime": {"type": "string", "format": "date-time"},
        "producer": URI,
        "schemaURL": URI,
        "run": {"type": "object", "required": ["runId"],
                "properties": {"runId": {"type": "string", "format": "uuid"}, "facets": {"type": "object"}}},
        "job": {"type": "object", "required": ["namespace", "name"],
                "properties": {"namespace": NAME, "name": NAME, "facets": {"type": "object"}}},
        "inputs": {"type": "array", "items": DATASET},
        "outputs": {"type": "array", "items": DATASET},
    },
}

TIME = {"type": "string", "format": "date-time"}
FACETS: dict[str, dict[str, Any]] = {  # facet key → its schema (the standard facets Freshet emits)
    "nominalTime": facet(("nominalStartTime",), nominalStartTime=TIME, nominalEndTime=TIME),
    "errorMessage": facet(("message", "programmingLanguage"), message={"type": "string"},
                          programmingLanguage={"type": "string"}, stackTrace={"type": "string"}),
    "outputStatistics": facet(("rowCount",), rowCount={"type": "integer", "minimum": 0},
                              size={"type": "integer", "minimum": 0}, fileCount={"type": "integer", "minimum": 0}),
    "version": facet(("datasetVersion",), datasetVersion={"type": "string"}),
    "jobType": facet(("processingType", "integration"), processingType={"enum": ["BATCH", "STREAMING"]},
                     integration={"type": "string"}, jobType={"type": "string"}),
    "sql": facet(("query",), query={"type": "string"}),
    "subset": facet(),
    "tags": facet(("tags",), tags={"type": "array", "items": {
        "type": "object", "required": ["key", "value"],
        "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}}),
}
