"""Run the user's command unchanged and watch it: the loop of `ddp-doctor run`.

The job inherits the doctor's stdin, stdout and stderr (a terminal stays a terminal, output is the
job's own bytes) and its process group (Ctrl-C on a terminal reaches the launcher exactly as
without the doctor). Other signals sent to the doctor are forwarded. The doctor only reads: the
run directory the startup hook fills, /proc, NVML. When the job ends, every process it left
behind is ended and counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from ddp_doctor.errors import UsageError
from ddp_doctor.jobwatch import collectives, envplan, evidence, hang, ras
from ddp_doctor.jobwatch.balance import WaitShares
from ddp_doctor.jobwatch.capture import StackTaker
from ddp_doctor.jobwatch.config import WatchConfig
from ddp_doctor.jobwatch.hook.ddp_doctor_rankfiles import RankPid
from ddp_doctor.jobwatch.liveview import LiveView, RankLine
from ddp_doctor.jobwatch.nvml import Timeline
from ddp_doctor.jobwatch.progress import ProgressClock
from ddp_doctor.jobwatch.rhythm import PHASE_ALLOWANCE_S, Threshold
from ddp_doctor.jobwatch.stacks import Stack, classify
from ddp_doctor.live import procs
from ddp_doctor.rundir import owner, reader

POLL_S = 0.5
SCAN_S = 2.0
TREE_SCAN_S = 5.0
"""The full /proc walk for the job's descendants (for the final cleanup) is the doctor's dearest read."""
INTERRUPT_GRACE_S = 30.0
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT, signal.SIGINT)


@dataclass(frozen=True)
class FirstLook:
    """The first of an examination's two looks at the ranks."""

    t: float
    pids: dict[int, int]
    stacks: dict[int, Stack]
    cpu: dict[int, float]
    """rank -> CPU seconds of the rank and its children then."""
    threshold: Threshold
    """The silence that started it."""


@dataclass
class HangEvent:
    at_s: float
    judgement: hang.Judgement
    stacks: dict[int, Stack]
    flight_recorder: dict[int, evidence.RecorderSummary]
    killed: bool = False
    stack_method: str = ""
    """Which method took the stacks and why (py-spy, or the hook's faulthandler because py-spy was refused)."""
    ras: ras.RasAnswer | None = None
    """NCCL RAS's answer on this hang (or why there is none); None: not asked (--no-ras)."""
    pids: dict[int, int] = field(default_factory=dict)
    """rank -> pid at the hang (RAS names processes, the report names ranks)."""
    threshold: Threshold | None = None
    """The silence that started the examination, and how it was set (learned, a phase's allowance, fixed)."""
    silent_s: float = 0.0
    """How long nothing had moved when the hang was named."""
    at_epoch: float = 0.0
    compared: collectives.Comparison | None = None
    """The ranks' collectives side by side (flight recorder, else sequence numbers)."""


class QuietSpell(TypedDict):
    """A silence examined and judged not a hang (facts["run"]["quiet"])."""

    at_s: float
    message: str
    states: dict[int, hang.RankLook]
    threshold: str
    """How the silence that started the examination was set."""


@dataclass
class WatchOutcome:
    command: tuple[str, ...]
    run_dir: Path
    returncode: int | None = None
    duration_s: float = 0.0
    started_epoch: float = field(default_factory=time.time)
    observability: list[envplan.Item] = field(default_factory=list)
    ranks: dict[int, RankPid] = field(default_factory=dict)
    """rank -> its rank-N.pid record."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """A hook file that is no record (rank-N.pid, rank-N.exit: foreign, cut short) -> why."""
    gone_at: dict[int, float] = field(default_factory=dict)
    """rank -> epoch seconds at which the doctor saw its process gone."""
    hangs: list[HangEvent] = field(default_factory=list)
    busy: list[QuietSpell] = field(default_factory=list)
    """Quiet spells judged not to be hangs."""
    interrupted: bool = False
    signals: list[str] = field(default_factory=list)
    leftovers: int = 0
    """Processes of the job still alive after the launcher ended, ended by the doctor."""
    shm_removed: list[str] = field(default_factory=list)
    shm_left: list[tuple[str, int]] = field(default_factory=list)
    """/dev/shm entries the job made and left, held by no process (name, bytes): not the doctor's to delete."""
    timeline: Timeline | None = None
    waits: WaitShares = field(default_factory=WaitShares)
    steps: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    stack_notes: list[str] = field(default_factory=list)


def _cpu_ticks(pid: int) -> int:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = raw[raw.rfind(")") + 2 :].split()
    # utime + stime, plus cutime + cstime: children it already reaped (a compiler's cc1plus) count as its work.
    return int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])


def _tree_cpu_s(pid: int) -> float:
    ticks = _cpu_ticks(pid) + sum(_cpu_ticks(p) for p in procs.descendants(pid))
    return ticks / os.sysconf("SC_CLK_TCK")


def _observations(
    exam: FirstLook,
    pids: dict[int, int],
    second: dict[int, Stack],
    window_s: float,
    fr: dict[int, evidence.RecorderSummary],
) -> list[hang.RankObs]:
    """What each rank did between the two looks: its stack then, whether it moved, its CPU, its recorder."""
    obs = []
    for r, pid in pids.items():
        st = second.get(r)
        before = exam.stacks.get(r)
        same = before is not None and st is not None and before.frames == st.frames
        cpu = (_tree_cpu_s(pid) - exam.cpu.get(r, 0.0)) / max(window_s, 1e-3)
        fr_r = fr.get(r)
        activity = classify(st.frames if st else ())
        pending, last_seq, last = (fr_r.pending, fr_r.last_seq, fr_r.last) if fr_r else (None, None, None)
        obs.append(hang.RankObs(r, activity, same, cpu, pending, last_seq, last))
    return obs


def _terminal_delivers_sigint() -> bool:
    """Ctrl-C on our terminal already reached the job (same foreground process group): don't send a second."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


class Watcher:
    def __init__(self, cfg: WatchConfig) -> None:
        self.cfg = cfg
        self.out = WatchOutcome(command=cfg.command, run_dir=cfg.run_dir)
        self.follow = evidence.LogFollower(cfg.run_dir)
        self.taker = StackTaker(cfg.run_dir, cfg.stacks)
        self.tracked: dict[int, int] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.interrupt_at: float | None = None
        self._pending_signals: list[int] = []
        self._exam: FirstLook | None = None
        self._episode_reported = False
        self.clock = ProgressClock(cfg.run_dir, cfg.rhythm(), self.started)
        self.phases: dict[int, str] = {}
        """rank -> the slow-but-healthy phase its latest sampled stack shows (compile, checkpoint, data, ...)."""
        self._looked_at = self.started
        """When the last examination found the job busy: the next look waits a threshold from then."""
        self._busy_looks = 0
        self._sampling = False
        self._live: LiveView | None = None
        self._env: dict[str, str] = {}

    # -- signals ------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: object) -> None:
        self._pending_signals.append(signum)

    def _forward(self) -> None:
        while self._pending_signals:
            signum = self._pending_signals.pop(0)
            name = signal.Signals(signum).name
            self.out.signals.append(name)
            if signum == signal.SIGINT:
                self.out.interrupted = True
                if self.interrupt_at is None:
                    self.interrupt_at = time.monotonic()
                if _terminal_delivers_sigint():
                    continue
            if self.proc is not None and self.proc.poll() is None:
                try:
                    os.kill(self.proc.pid, signum)
                except ProcessLookupError:
                    pass

    # -- ranks --------------------------------------------------------------------------------
    def rank_pids(self) -> dict[int, int]:
        """rank -> pid of the ranks still alive."""
        pids = {rec.pid for rec in self.out.ranks.values()}
        living = procs.alive({p: self.tracked[p] for p in pids if p in self.tracked})
        return {r: rec.pid for r, rec in self.out.ranks.items() if rec.pid in living}

    def _scan(self, now: float, tree: bool = True) -> None:
        assert self.proc is not None
        if tree:
            self.tracked.update(procs.descendants(self.proc.pid))
        found = reader.read_hook_files(self.cfg.run_dir, "pid", RankPid.from_json)
        self.out.unreadable.update(found.unreadable)
        for r in found.records:  # read whole now (a name can be reused by a restarted worker)
            self.out.unreadable.pop(f"rank-{r}.pid", None)
        for r, rec in found.records.items():
            pid = rec.pid
            if pid and pid not in self.tracked:
                start = owner.start_ticks(pid)
                if start is not None:
                    self.tracked[pid] = start
            self.out.ranks.setdefault(r, rec)
            if rec.pid != self.out.ranks[r].pid:
                self.out.ranks[r] = rec  # a restarted worker (torchrun --max-restarts)
                self.out.gone_at.pop(r, None)
        living = self.rank_pids()
        for r, rec in self.out.ranks.items():
            if r not in self.out.gone_at and living.get(r) != rec.pid:
                self.out.gone_at[r] = time.time()

    # -- hang examination: two samples a confirm window apart ------------------------------
    def _confirm_s(self, threshold_s: float) -> float:
        return min(10.0, max(2.0, threshold_s / 3))

    def _look_after(self) -> Threshold:
        """The silence before the next look; a learned one doubles while looks keep finding the job busy."""
        thr = self.clock.threshold(self.phases)
        if self.cfg.hang_after_s is not None or not self._busy_looks:
            return thr
        longer = min(thr.seconds * 2**self._busy_looks, max(thr.seconds, self.cfg.hang_start_s))
        return Threshold(longer, f"{thr.why}; doubled after {self._busy_looks} looks found the job busy")

    def _examine(self, now: float) -> None:
        """Two looks a confirm window apart: the first once the silence passed its threshold, then the judgement."""
        if self._exam is None:
            self._first_look(now)
            return
        if now - self._exam.t < self._confirm_s(self._exam.threshold.seconds):
            return
        exam, self._exam = self._exam, None
        if self.clock.last_move > exam.t:
            return  # it moved
        self._judge(now, exam)

    def _first_look(self, now: float) -> None:
        thr = self._look_after()
        if now - max(self.clock.last_move, self._looked_at) < thr.seconds or self._episode_reported:
            return
        pids = self.rank_pids()
        if not pids:
            self._looked_at = now  # nothing to examine yet (still starting)
            return
        first = self.taker.capture(pids, self._hook_stacks())
        self._request_fr()
        self._exam = FirstLook(now, pids, first, {r: _tree_cpu_s(p) for r, p in pids.items()}, thr)

    def _judge(self, now: float, exam: FirstLook) -> None:
        quiet_s = now - self.clock.last_move
        pids = {r: p for r, p in exam.pids.items() if r in self.rank_pids()}
        second = self.taker.capture(pids, self._hook_stacks())
        fr = evidence.flight_recorder_summary(self.cfg.run_dir)
        obs = _observations(exam, pids, second, now - exam.t, fr)
        alive = self.rank_pids()
        records, missing = evidence.collective_records(
            self.cfg.run_dir, {r: r in alive for r in exam.pids}, self.cfg.flight_recorder and self.cfg.hook
        )
        compared = collectives.compare(records, missing)
        all_here = self._all_ranks_here()
        verdict = hang.judge(obs, quiet_s, compared, self.clock.silent(), all_here)
        at_s = round(now - self.started, 1)
        self.out.stack_notes = list(self.taker.notes)
        if self.cfg.hang_after_s is None and quiet_s < self.cfg.hang_start_s and hang.elsewhere(verdict, all_here):
            verdict = hang.Judgement(
                "busy",
                message=f"{verdict.message}; a peer on another node may still be working (a checkpoint, a slower "
                f"node): named after {self.cfg.hang_start_s:.0f} s of silence",
                states=verdict.states,
            )
        if verdict.verdict == "hang":
            event = HangEvent(
                at_s,
                verdict,
                second,
                fr,
                stack_method=self.taker.why_method(second),
                pids=dict(pids),
                threshold=exam.threshold,
                silent_s=round(quiet_s, 1),
                at_epoch=time.time(),
                compared=compared,
            )
            if self.cfg.ras:
                event.ras = self._ask_ras()
            self.out.hangs.append(event)
            self._episode_reported = True
            print(f"ddp-doctor: HANG at {at_s:.0f} s: {verdict.message}", file=sys.stderr, flush=True)
            if self.cfg.on_hang == "kill":
                event.killed = True
                self._stop_job("hang")
        else:
            self.out.busy.append(
                QuietSpell(at_s=at_s, message=verdict.message, states=verdict.states, threshold=exam.threshold.why)
            )
            self._looked_at = now  # judged busy: look again after another threshold
            self._busy_looks += 1

    def _all_ranks_here(self) -> bool:
        """Every rank of the job runs on this node (WORLD_SIZE, from the ranks' pid records, all seen here)."""
        worlds = {rec.world_size for rec in self.out.ranks.values()}
        world = next(iter(worlds)) if len(worlds) == 1 else None
        return isinstance(world, int) and set(range(world)) <= set(self.out.ranks)

    def _ask_ras(self) -> ras.RasAnswer:
        """NCCL's RAS, bounded by its deadline; its raw answer is kept in the run directory."""
        assert self.proc is not None
        job = set(self.tracked) | {self.proc.pid} | set(self.rank_pids().values())
        answer = ras.ask(self._env, job)
        if answer.report is not None:
            (self.cfg.run_dir / "ras-status.txt").write_text(answer.report.text, encoding="utf-8")
        return answer

    def _hook_stacks(self) -> bool:
        return self.cfg.hook and self.cfg.stacks in ("auto", "hook")

    def _request_fr(self) -> None:
        if self.cfg.hook:  # fresh heartbeats always; recorder dumps unless --no-flight-recorder
            # An earlier request's dumps would pass for this one's: a rank that does not answer now is missing.
            for old in self.cfg.run_dir.glob("fr-rank-*"):
                old.unlink(missing_ok=True)
            (self.cfg.run_dir / "dump.request").write_text(str(time.time()))

    # -- straggler sampling -------------------------------------------------------------------
    def _sample(self, now: float, last: float) -> float:
        if self.cfg.stack_sample_s <= 0 or not self._hook_stacks() or self._exam is not None:
            return last
        if self._sampling:
            acts = {r: classify(frames) for r, frames in self.taker.collect().items()}
            self.phases = {r: a.kind for r, a in acts.items() if a.kind in PHASE_ALLOWANCE_S}
            # Only samples taken while training runs in step (some rank inside a collective) say who waits for whom.
            # Compiling and importing are one-time start-up work, not load imbalance.
            in_step = any(a.kind in ("collective", "backward") for a in acts.values())
            if in_step and not any(a.kind in ("compile", "import") for a in acts.values()):
                for r, act in acts.items():
                    where = f"{act.frame.where()}: {act.frame.source()}" if act.frame else None
                    self.out.waits.add(r, act.kind, where)
            self._sampling = False
        if now - last >= self.cfg.stack_sample_s:
            pids = self.rank_pids()
            if len(pids) >= 2:
                self.taker.request(pids)
                self._sampling = True
            return now
        return last

    # -- stopping ----------------------------------------------------------------------------
    def _stop_job(self, why: str) -> None:
        """SIGTERM to the launcher and every rank, a grace period, then SIGKILL."""
        if self.proc is None:
            return
        self.tracked.update(procs.descendants(self.proc.pid))
        self.tracked[self.proc.pid] = procs.descendants(os.getpid()).get(self.proc.pid, 0)
        procs.end_all({p: s for p, s in self.tracked.items() if s}, self.cfg.kill_grace_s)
        try:
            self.proc.wait(timeout=self.cfg.kill_grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> WatchOutcome:
        cfg = self.cfg
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        env, self.out.observability = envplan.plan(cfg, os.environ)
        self._env = env
        timeline = Timeline(cfg.run_dir / "gpu-timeline.jsonl", cfg.sample_hz)
        self.out.timeline = timeline
        shm_before = procs.shm_entries()
        old = {s: signal.signal(s, self._on_signal) for s in FORWARDED}
        try:
            timeline.start()
            self.out.started_epoch = time.time()
            try:
                self.proc = subprocess.Popen(list(cfg.command), env=env)
            except OSError as exc:
                raise UsageError(f"cannot start {cfg.command[0]}: {exc.strerror or exc}") from None
            self._loop()
        finally:
            try:
                self._finish(shm_before)
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
                timeline.stop()
        return self.out

    def _show_live(self, view: LiveView, now: float) -> None:
        ages = self.follow.rank_output_age(now)
        living = self.rank_pids()
        lines = [RankLine(r, rec.pid, r in living, ages.get(r)) for r, rec in sorted(self.out.ranks.items())]
        tl = self.out.timeline
        view.update(now - self.started, lines, tl.latest() if tl else {}, tl.note if tl else None)

    def _loop(self) -> None:
        assert self.proc is not None
        last_scan = last_sample = last_tree = 0.0
        if self.cfg.live:
            self._live = LiveView()
        while True:
            self._forward()
            now = time.monotonic()
            if now - last_scan >= SCAN_S:
                tree = now - last_tree >= TREE_SCAN_S or not self.out.ranks
                self._scan(now, tree)
                last_scan = now
                last_tree = now if tree else last_tree
                if self._live is not None:
                    self._show_live(self._live, now)
            if self.clock.poll(now, self.follow.poll(now)):
                self._episode_reported = False
                self._busy_looks = 0
            last_sample = self._sample(now, last_sample)
            self._examine(now)
            if self.proc.poll() is not None:
                break
            if self.interrupt_at is not None and now - self.interrupt_at > INTERRUPT_GRACE_S:
                self._stop_job("interrupted")
            time.sleep(POLL_S)
        self._forward()

    def _finish(self, shm_before: set[str]) -> None:
        if self._live is not None:
            self._live.close()
        if self.proc is not None:
            if self.proc.poll() is None:
                self._stop_job("doctor exiting")
            self.out.returncode = self.proc.returncode
            self.tracked.update(procs.descendants(self.proc.pid))
            self._scan(time.monotonic())
            # The launcher is gone; whatever of the job still runs would outlive the command.
            self.out.leftovers = procs.end_all(self.tracked, self.cfg.kill_grace_s)
            pids = set(self.tracked) | {r.pid for r in self.out.ranks.values()}
            self.out.shm_removed = procs.remove_new_shm(shm_before, pids)
            self.out.shm_left = procs.shm_left_behind(shm_before, self.started_wall)
        self.follow.poll(time.monotonic())
        self.out.steps = self.follow.steps()
        self.out.duration_s = round(time.monotonic() - self.started, 3)


def watch(cfg: WatchConfig) -> WatchOutcome:
    return Watcher(cfg).run()
