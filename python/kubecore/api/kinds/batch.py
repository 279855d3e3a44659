"""batch/v1: Jobs and CronJobs.

Job creation first does what upstream's job strategy does before validating: unless
``spec.manualSelector`` is true it generates the selector from the job's uid and labels the pod
template to match (``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name`` and
the legacy ``controller-uid``/``job-name``). Then ValidateJob / ValidateJobUpdate /
ValidateCronJob(Create|Update) with upstream's texts.
"""

from __future__ import annotations

import msgspec

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, go_selector, immutable, invalid_raw, label_selector, m, nonneg, num, s, selector_ok,
    template_matches,
)
from kubecore.api.kinds.cron import parse_error, time_zone_error
from kubecore.api.kinds.podspec import pod_template

UID_LABEL, NAME_LABEL = "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"
COMPLETION_MODES = ("NonIndexed", "Indexed")
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
MAX_INDEXED = 100000


def generate_selector(obj: Obj) -> None:
    """The job strategy's PrepareForCreate: selector and template labels from the uid."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    meta = m(obj, "metadata")
    uid, name = s(meta, "uid"), s(meta, "name")
    tmpl = spec.setdefault("template", {})
    if not isinstance(tmpl, dict):
        return
    tmeta = tmpl.setdefault("metadata", {})
    if not isinstance(tmeta, dict):
        return
    labels = tmeta.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    labels.update({UID_LABEL: uid, NAME_LABEL: name, "controller-uid": uid, "job-name": name})
    tmeta["labels"] = labels
    if spec.get("selector") is None:
        spec["selector"] = {"matchLabels": {UID_LABEL: uid}}


def _job_spec(spec: Obj, path: str) -> Errs:
    """validateJobSpec."""
    errs: Errs = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        errs.extend(nonneg(spec, key, path))
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in COMPLETION_MODES:
            errs.append(FieldError.not_supported(f"{path}.completionMode", mode, COMPLETION_MODES))
        if mode == "Indexed":
            completions, parallelism = num(spec, "completions"), num(spec, "parallelism")
            if completions is None:
                errs.append(FieldError.required(f"{path}.completions", "when completion mode is Indexed"))
            elif completions > MAX_INDEXED:
                errs.append(FieldError.invalid(f"{path}.completions", completions, (
                    f"must be less than or equal to {MAX_INDEXED} when completion mode is Indexed")))
            if parallelism is not None and parallelism > MAX_INDEXED:
                errs.append(FieldError.invalid(f"{path}.parallelism", parallelism, (
                    f"must be less than or equal to {MAX_INDEXED} when completion mode is Indexed")))
    errs.extend(pod_template(spec.get("template"), f"{path}.template"))
    restart = s(m(m(spec, "template"), "spec"), "restartPolicy")
    rp = f"{path}.template.spec.restartPolicy"
    if restart in ("Always", ""):
        errs.append(FieldError.required(rp, 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        errs.append(FieldError.not_supported(rp, restart, ["OnFailure", "Never"]))
    return errs


def job(obj: Obj) -> Errs:
    """ValidateJob (selector required and matching the template)."""
    spec = m(obj, "spec")
    errs = _job_spec(spec, "spec")
    sel = spec.get("selector")
    if not isinstance(sel, dict):
        errs.append(FieldError.required("spec.selector"))
    else:
        errs.extend(label_selector(sel, "spec.selector"))
        if selector_ok(sel):
            errs.extend(template_matches(sel, spec.get("template"), "spec.template", skip_empty=False))
    return errs


def _json(v: object) -> str:
    return msgspec.json.encode(v).decode()


def job_update(new: Obj, old: Obj) -> Errs:
    """ValidateJobUpdate: completions, selector immutable; the template too unless suspended."""
    spec, old_spec = m(new, "spec"), m(old, "spec")
    errs = job(new)
    if not (spec.get("completionMode") == "Indexed" and num(spec, "completions") == num(spec, "parallelism")):
        errs.extend(immutable(spec.get("completions"), old_spec.get("completions"), "spec.completions",
                              lambda v: "null" if v is None else str(v)))
    errs.extend(immutable(spec.get("selector"), old_spec.get("selector"), "spec.selector", go_selector))
    if old_spec.get("suspend") is not True:
        errs.extend(immutable(spec.get("template"), old_spec.get("template"), "spec.template", _json))
    return errs


def _job_template(tmpl: Obj, path: str) -> Errs:
    """ValidateJobTemplateSpec: the selector is generated, so it may not be given."""
    spec = m(tmpl, "spec")
    errs = _job_spec(spec, f"{path}.spec")
    if spec.get("selector") is not None:
        errs.append(invalid_raw(f"{path}.spec.selector", go_selector(spec.get("selector")),
                                "`selector` will be auto-generated"))
    if spec.get("manualSelector") is True:
        errs.append(FieldError.not_supported(f"{path}.spec.manualSelector", True, ["nil", "false"]))
    return errs


def cron_job(obj: Obj, old: Obj | None = None) -> Errs:
    """ValidateCronJobSpec (+ the 52-character name limit on create)."""
    spec = m(obj, "spec")
    errs: Errs = []
    name = s(m(obj, "metadata"), "name")
    if old is None and len(name) > 52:
        errs.append(FieldError.invalid("metadata.name", name, "must be no more than 52 characters"))
    schedule = s(spec, "schedule")
    if not schedule:
        errs.append(FieldError.required("spec.schedule"))
    else:
        errs.extend(_schedule(schedule, spec, old))
    errs.extend(nonneg(spec, "startingDeadlineSeconds", "spec"))
    policy = s(spec, "concurrencyPolicy")
    if not policy:
        errs.append(FieldError.required("spec.concurrencyPolicy"))
    elif policy not in CONCURRENCY_POLICIES:
        errs.append(FieldError.not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    errs.extend(_job_template(m(spec, "jobTemplate"), "spec.jobTemplate"))
    if spec.get("timeZone") is not None:
        detail = time_zone_error(s(spec, "timeZone"))
        if detail:
            errs.append(FieldError.invalid("spec.timeZone", s(spec, "timeZone"), detail))
    return errs


def _schedule(schedule: str, spec: Obj, old: Obj | None) -> Errs:
    errs: Errs = []
    err = parse_error(schedule)
    if err:
        errs.append(FieldError.invalid("spec.schedule", schedule, err))
    allow_tz = old is not None and "TZ" in s(m(old, "spec"), "schedule")
    if allow_tz and "TZ" in schedule and spec.get("timeZone") is not None:
        errs.append(FieldError.invalid("spec.schedule", schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
    elif not allow_tz and "TZ" in schedule:
        errs.append(FieldError.invalid("spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    return errs


def cron_job_update(new: Obj, old: Obj) -> Errs:
    return cron_job(new, old)
