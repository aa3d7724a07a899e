"""OpenLineage run events of pipeline runs and step attempts, composed from plain values.

A pipeline run is a run of job `<pipeline>`; each step attempt is a run of job
`<pipeline>.<step>` whose parent run facet points at the pipeline run. Datasets: a file is
`file` + its absolute path, a sandbox table `postgres://host:port` + `db.schema.table`,
and a step's committed output (what the next step reads) `<namespace>` + `<pipeline>.<step>`.
Nothing here reads a database or the clock: `actors.lineage.facts` gathers the values."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    schema_dataset,
)
from openlineage.client.generated.base import RunFacet

import connectors
from actors.datasets import Places, file_dataset
from actors.lineage.assertions import FACET as ASSERTIONS
from actors.lineage.assertions import assertions_facet
from actors.lineage.notices import COMPLETE, FAIL, Notice
from actors.sources import source_impl
from actors.targets import target_impl
from dag import Plan
from dag.ops import OPS, Derivation

PRODUCER = "urn:etl-platform:openlineage"
INTEGRATION = "ETL_PLATFORM"
# uuid5 namespace of step attempts' run ids: the same attempt always gets the same run id.
ATTEMPT_RUN_IDS = uuid.UUID("6f1d8a52-3c1e-5b7a-9d0e-2f4c6b8a1e37")
TRACE_FACET = "etl_run"
PARAMS_FACET = "etl_params"


@dataclass(frozen=True)
class StepFacts:
    """A step's recorded progress: counters and output columns (`[(name, type)]`, None
    until its first batch committed)."""

    records_in: int = 0
    records_out: int = 0
    rejected: int = 0
    columns: tuple[tuple[str, str], ...] | None = None
    error: str | None = None
    checks: tuple[dict[str, Any], ...] = ()  # its data check results (`dag.checks`)


@dataclass(frozen=True)
class RunFacts:
    """What the events of one run tell besides the notice: read once per notice."""

    pipeline: str
    trace_id: str
    plan: Plan
    steps: dict[str, StepFacts] = field(default_factory=dict)
    error: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@attr.define
class EtlRunFacet(RunFacet):
    """The platform's own identity of the run: run id, trace id, attempt (steps)."""

    runId: str
    traceId: str
    attempt: int | None = attr.field(default=None)
    _additional_skip_redact: ClassVar[list[str]] = ["runId", "traceId", "attempt"]

    @staticmethod
    def _get_schema() -> str:
        return "urn:etl-platform:openlineage:facets:1-0-0:EtlRunFacet.json#/$defs/EtlRunFacet"


@attr.define
class EtlParamsRunFacet(RunFacet):
    """The run's parameter values (`params` of `GET /api/v1/runs/{id}`: given, defaulted and
    built-in), the values its paths and literals were substituted with."""

    params: dict[str, Any]
    _additional_skip_redact: ClassVar[list[str]] = ["params"]

    @staticmethod
    def _get_schema() -> str:
        return (
            "urn:etl-platform:openlineage:facets:1-0-0:EtlParamsRunFacet.json"
            "#/$defs/EtlParamsRunFacet"
        )


def attempt_run_id(run_id: str, step: str, attempt: int) -> str:
    """The OpenLineage run id of attempt `attempt` of `step` (stable: START and its end
    share it; every attempt, a resumed step's included, has its own)."""
    return str(uuid.uuid5(ATTEMPT_RUN_IDS, f"{run_id}/{step}/{attempt}"))


def compose(notice: Notice, facts: RunFacts, *, namespace: str, places: Places | None) -> RunEvent:
    """The event of `notice`: a pipeline run's, or a step attempt's with its datasets
    (`places` None: none, e.g. a reaped attempt seen from the coordinator)."""
    if notice.step is None:
        return _run_event(notice, facts, namespace)
    return _step_event(notice, facts, namespace, places)


def _run_event(notice: Notice, facts: RunFacts, namespace: str) -> RunEvent:
    facets: dict[str, Any] = {TRACE_FACET: _trace(notice.run_id, facts), **_params(facts)}
    if notice.event_type == FAIL:
        message = facts.error or _first_step_error(facts) or "run failed"
        facets["errorMessage"] = _error(message)
    return RunEvent(
        eventType=RunState(notice.event_type),
        eventTime=notice.at.isoformat(),
        run=Run(runId=notice.run_id, facets=facets),
        job=Job(namespace=namespace, name=facts.pipeline, facets=_job_facets("DAG")),
        producer=PRODUCER,
    )


def _step_event(notice: Notice, facts: RunFacts, namespace: str, places: Places | None) -> RunEvent:
    assert notice.step is not None and notice.attempt is not None
    step = facts.plan.step(notice.step)
    parent_job = {"namespace": namespace, "name": facts.pipeline}
    facets: dict[str, Any] = {
        "parent": parent_run.ParentRunFacet(
            run=parent_run.Run(runId=notice.run_id),
            job=parent_run.Job(**parent_job),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=notice.run_id), job=parent_run.RootJob(**parent_job)
            ),
            producer=PRODUCER,
        ),
        TRACE_FACET: _trace(notice.run_id, facts, notice.attempt),
        **_params(facts),
    }
    if notice.error and notice.event_type == FAIL:
        facets["errorMessage"] = _error(notice.error)
    inputs, outputs = [], []
    if places is not None:
        done = notice.event_type == COMPLETE
        inputs, outputs = _datasets(step.name, notice.run_id, facts, namespace, places, done)
        if notice.event_type in (COMPLETE, FAIL):
            inputs += _checked(step.name, facts, namespace, outputs)
    return RunEvent(
        eventType=RunState(notice.event_type),
        eventTime=notice.at.isoformat(),
        run=Run(runId=attempt_run_id(notice.run_id, step.name, notice.attempt), facets=facets),
        job=Job(
            namespace=namespace, name=f"{facts.pipeline}.{step.name}", facets=_job_facets("TASK")
        ),
        inputs=inputs,
        outputs=outputs,
        producer=PRODUCER,
    )


def _datasets(
    name: str, run_id: str, facts: RunFacts, namespace: str, places: Places, done: bool
) -> tuple[list[InputDataset], list[OutputDataset]]:
    """A step's input and output datasets. Schemas wherever the columns are known; row
    counts (input and output statistics) only once the step committed (`done`)."""
    step = facts.plan.step(name)
    own = facts.steps.get(name, StepFacts())
    config = step.config
    if step.type == "ingest":
        sources = [(source_impl(config).dataset(places, config), own.columns)]
    else:
        sources = [
            (_output(namespace, facts, dep), _columns(facts, dep)) for dep in step.depends_on
        ]
    inputs = []
    for (ns, ds_name), columns in sources:
        in_facets = _schema(columns)
        if done and len(sources) == 1:
            stats = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                rowCount=own.records_in, producer=PRODUCER
            )
            inputs.append(
                InputDataset(ns, ds_name, facets=in_facets, inputFacets={"inputStatistics": stats})
            )
        else:
            inputs.append(InputDataset(ns, ds_name, facets=in_facets))
    if step.type == "export":
        target = target_impl(config).dataset(places, run_id, name, config)
        columns = own.columns or (sources[0][1] if len(sources) == 1 else None)
        lineage = None
    else:
        target, columns = _output(namespace, facts, name), own.columns
        lineage = (
            _column_lineage(step.config, sources, columns) if step.type == "transform" else None
        )
    out_facets = _schema(columns)
    if lineage is not None:
        out_facets["columnLineage"] = lineage
    outputs = [_output_dataset(target, out_facets, own.records_out if done else None)]
    if done and own.rejected:
        rejects = connectors.reject_file(places.reject_dir, run_id, name).final_path
        outputs.append(_output_dataset(file_dataset(rejects), {}, own.rejected))
    return inputs, outputs


def _checked(
    name: str, facts: RunFacts, namespace: str, outputs: list[OutputDataset]
) -> list[InputDataset]:
    """The dataset a step's checks read (its output; an export's target), as an input with
    the results in the `dataQualityAssertions` facet (`actors.lineage.assertions`)."""
    facet = assertions_facet(facts.steps.get(name, StepFacts()).checks, PRODUCER)
    if facet is None:
        return []
    step = facts.plan.step(name)
    if step.type == "export" and outputs:
        checked, columns = (outputs[0].namespace, outputs[0].name), outputs[0].facets or {}
    else:
        checked, columns = _output(namespace, facts, name), _schema(_columns(facts, name))
    ns, ds_name = checked
    return [InputDataset(ns, ds_name, facets=dict(columns), inputFacets={ASSERTIONS: facet})]


def _output_dataset(
    where: tuple[str, str], facets: dict[str, Any], row_count: int | None
) -> OutputDataset:
    ns, name = where
    if row_count is None:
        return OutputDataset(ns, name, facets=facets)
    stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=row_count, producer=PRODUCER
    )
    return OutputDataset(ns, name, facets=facets, outputFacets={"outputStatistics": stats})


def _column_lineage(
    config: dict[str, Any],
    sources: list[tuple[tuple[str, str], tuple[tuple[str, str], ...] | None]],
    out_columns: tuple[tuple[str, str], ...] | None,
) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
    """Column lineage as the op's rule in the registry (`dag.ops`) says it; with the rule's
    `identity_rest`, every other known output column passes through unchanged (identity).
    An op without a rule is a `KeyError`, never lineage quietly left out."""
    if len(sources) != 1:
        return None
    (ns, name), _in_columns = sources[0]
    rule = OPS[config["op"]].lineage(config)

    def field_of(derivation: Derivation) -> column_lineage_dataset.InputField:
        transformation = column_lineage_dataset.Transformation(
            type=derivation.kind, subtype=derivation.subtype, description=derivation.description
        )
        return column_lineage_dataset.InputField(
            namespace=ns, name=name, field=derivation.column, transformations=[transformation]
        )

    fields = {column: [field_of(d) for d in ds] for column, ds in rule.fields.items()}
    if rule.identity_rest:
        for column, _type in out_columns or ():
            fields.setdefault(column, [field_of(Derivation(column, "DIRECT", "IDENTITY"))])
    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={k: column_lineage_dataset.Fields(inputFields=v) for k, v in fields.items()},
        dataset=[field_of(d) for d in rule.dataset],
        producer=PRODUCER,
    )


def _schema(columns: Iterable[tuple[str, str]] | None) -> dict[str, Any]:
    if columns is None:
        return {}
    fields = [schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in columns]
    return {"schema": schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)}


def _columns(facts: RunFacts, step: str) -> tuple[tuple[str, str], ...] | None:
    return facts.steps.get(step, StepFacts()).columns


def _output(namespace: str, facts: RunFacts, step: str) -> tuple[str, str]:
    """A step's committed output, which its dependents read."""
    return namespace, f"{facts.pipeline}.{step}"


def _job_facets(job_type: str) -> dict[str, Any]:
    return {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration=INTEGRATION, jobType=job_type, producer=PRODUCER
        )
    }


def _trace(run_id: str, facts: RunFacts, attempt: int | None = None) -> EtlRunFacet:
    return EtlRunFacet(runId=run_id, traceId=facts.trace_id, attempt=attempt, producer=PRODUCER)


def _params(facts: RunFacts) -> dict[str, EtlParamsRunFacet]:
    """The `etl_params` facet of a run that holds values (every run made since run
    parameters exist holds at least `run_id`)."""
    if not facts.params:
        return {}
    return {PARAMS_FACET: EtlParamsRunFacet(params=dict(facts.params), producer=PRODUCER)}


def _error(message: str) -> error_message_run.ErrorMessageRunFacet:
    return error_message_run.ErrorMessageRunFacet(
        message=message, programmingLanguage="python", producer=PRODUCER
    )


def _first_step_error(facts: RunFacts) -> str | None:
    for step in facts.plan.steps:
        error = facts.steps.get(step.name, StepFacts()).error
        if error:
            return f"step {step.name}: {error}"
    return None
