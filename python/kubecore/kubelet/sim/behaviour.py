"""How a simulated pod behaves, read from its annotations (prefix `sim.kubecore.io/`).

The simulated runtime has no processes, so a pod says what its containers would do. Every key
also exists per container, with the container name after a dot, which wins over the pod-wide key:
`sim.kubecore.io/exit-code.worker: "3"`.

| annotation | meaning | default |
| --- | --- | --- |
| `duration` | a container exits this long after it starts (Go duration: `500ms`, `5s`, `1m30s`) | `1s` when restartPolicy is Never/OnFailure; runs forever under Always |
| `init-duration` | the same for (non-sidecar) init containers | `0s` (exits at once) |
| `exit-code` | the code a container exits with when its duration ends | `0` (reason Completed; non-zero: Error) |
| `stop-duration` | how long a container takes to stop after SIGTERM; past the grace period it is killed | `0s` |
| `pull-fail` | comma list of images (as written in the spec) whose pulls fail, or `*` | none |
| `readiness`, `liveness`, `startup` | `pass` or `fail`: the answer to every probe of that kind | `pass` |
| `log` | lines written to the container's CRI log file (stdout) when it starts; `{attempt}`, `{container}`, `{pod}` are replaced (see `logs.py`) | no log file |
| `log-every` | with `log`: the lines are written again at this interval while the container runs | once |

A container stopped by the kubelet exits 143 (SIGTERM), or 137 when it was still running at the
end of its grace period (SIGKILL), as a process without a SIGTERM handler would.

Example, a Job pod that fails after 2 s: `sim.kubecore.io/duration: 2s`,
`sim.kubecore.io/exit-code: "1"`; a pod that never becomes ready: `sim.kubecore.io/readiness: fail`.

`SimHandlers` answers probes and hooks (nothing listens on a simulated pod's IP):

- A probe of kind K (readiness, liveness, startup) fails when the pod is annotated
  `sim.kubecore.io/K: fail` (or `sim.kubecore.io/K.<container>: fail`), with the message
  "simulated K probe failure (annotation sim.kubecore.io/K)"; otherwise an exec probe goes
  through the runtime's ExecSync (which fails for a container that is not running) and an
  httpGet/tcpSocket/grpc probe succeeds.
- Lifecycle hooks: exec through ExecSync, sleep on the clock, httpGet/tcpSocket succeed.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubecore.api.gotime import parse_duration
from kubecore.client.clock import Clock
from kubecore.kubelet import cri, podutil
from kubecore.kubelet.handlers import FAILURE, SUCCESS, UNKNOWN, Obj, Outcome, Target, handler_kind

PREFIX = "sim.kubecore.io/"
DURATION = "duration"
INIT_DURATION = "init-duration"
EXIT_CODE = "exit-code"
STOP_DURATION = "stop-duration"
PULL_FAIL = "pull-fail"
PROBE_KINDS = ("readiness", "liveness", "startup")
LOG = "log"
LOG_EVERY = "log-every"
DEFAULT_JOB_DURATION = 1.0

class BehaviourError(ValueError):
    """An annotation whose value cannot be understood."""


def parse_go_duration(text: str) -> float:
    """A Go duration ("1m30s", "500ms", "2h") in seconds; a bare number is seconds."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise BehaviourError(str(e)) from None


def lookup(annotations: Mapping[str, str], key: str, container: str) -> str | None:
    """The container-specific value of `key`, else the pod-wide one, else None."""
    value = annotations.get(f"{PREFIX}{key}.{container}")
    if value is None:
        value = annotations.get(f"{PREFIX}{key}")
    return value


def run_duration(annotations: Mapping[str, str], container: str, *, container_type: str,
                 restart_policy: str) -> float | None:
    """How long a started container runs before exiting on its own (None: until stopped)."""
    if container_type == "init":
        value = lookup(annotations, INIT_DURATION, container)
        return parse_go_duration(value) if value is not None else 0.0
    value = lookup(annotations, DURATION, container)
    if value is not None:
        return parse_go_duration(value)
    if container_type == "container" and restart_policy in ("Never", "OnFailure"):
        return DEFAULT_JOB_DURATION
    return None


def exit_code(annotations: Mapping[str, str], container: str) -> int:
    value = lookup(annotations, EXIT_CODE, container)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise BehaviourError(f"{PREFIX}{EXIT_CODE} must be an integer, not {value!r}") from None


def stop_duration(annotations: Mapping[str, str], container: str) -> float:
    value = lookup(annotations, STOP_DURATION, container)
    return parse_go_duration(value) if value is not None else 0.0


def pull_fails(annotations: Mapping[str, str], image: str) -> bool:
    value = annotations.get(PREFIX + PULL_FAIL)
    if not value:
        return False
    wanted = {v.strip() for v in value.split(",") if v.strip()}
    return "*" in wanted or image in wanted


def probe_answer(annotations: Mapping[str, str], kind: str, container: str) -> str:
    """"pass" or "fail" for a probe of `kind` ("readiness", "liveness", "startup")."""
    value = (lookup(annotations, kind, container) or "pass").strip().lower()
    if value not in ("pass", "fail"):
        raise BehaviourError(f"{PREFIX}{kind} must be pass or fail, not {value!r}")
    return value


class SimHandlers:
    """`handlers.Handlers` for the simulated runtime (see the module docstring)."""

    def __init__(self, runtime: cri.RuntimeService, *, clock: Clock) -> None:
        self.runtime = runtime
        self.clock = clock

    async def probe(self, kind: str, target: Target, probe: Obj) -> Outcome:
        name = str(target.container.get("name"))
        try:
            answer = probe_answer(podutil.pod_annotations(target.pod), kind, name)
        except BehaviourError as e:
            return Outcome(UNKNOWN, str(e))
        if answer == "fail":
            return Outcome(FAILURE, f"simulated {kind} probe failure (annotation {PREFIX}{kind})")
        if handler_kind(probe) == "exec":
            return await self._exec(target, list((probe["exec"] or {}).get("command") or []))
        return Outcome(SUCCESS)

    async def hook(self, kind: str, target: Target, handler: Obj, *, timeout: float) -> str | None:
        which = handler_kind(handler)
        if which == "sleep":
            await self.clock.sleep(float((handler["sleep"] or {}).get("seconds") or 0))
            return None
        if which == "exec":
            outcome = await self._exec(target, list((handler["exec"] or {}).get("command") or []))
            return None if outcome.result == SUCCESS else outcome.output
        return None

    async def _exec(self, target: Target, command: list[str]) -> Outcome:
        try:
            resp = await self.runtime.exec_sync(target.container_id, command, 1)
        except cri.CriError as e:
            return Outcome(UNKNOWN, str(e))
        return Outcome(SUCCESS if resp.exit_code == 0 else FAILURE, resp.stdout.decode(errors="replace"))
