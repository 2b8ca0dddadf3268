"""A resource-limited IPython kernel for the grader, driven one cell at a time.

The kernel is an ordinary ``ipykernel`` started by ``jupyter_client`` with a launch command of
our own: a few lines of Python that set ``RLIMIT_DATA`` (heap and private anonymous mappings:
the memory limit), ``RLIMIT_AS`` (address space, a backstop for shared anonymous mappings; set
well above the memory limit because importing torch maps several hundred MB of libraries),
``RLIMIT_FSIZE`` (no file above 1 GiB) and ``RLIMIT_CORE`` (no core dumps), and then fork:
the child becomes ipykernel, the parent waits for it and passes on its exit status, so that the
kernel's parent is not the grader (a notebook killing ``os.getppid()`` fails only itself). The kernel runs in its own session (process group), so a kill reaches anything it
spawned in that group. Outputs are never collected: the grader only reads each request's reply
status (ok / error with the exception name and value), so a notebook that floods its output
cannot exhaust the grader's memory, and nothing the notebook prints can influence a grade.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Launch command of the kernel: set the limits, then become ipykernel.
_LAUNCHER = """\
import os, resource, sys
def _lim(res, value):
    try:
        soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, hard if hard != resource.RLIM_INFINITY else value))
    except (ValueError, OSError):
        pass
_mem = int(os.environ.pop("RLNOTES_GRADER_MEMORY_BYTES"))
_lim(resource.RLIMIT_DATA, _mem)
_lim(resource.RLIMIT_AS, 2 * _mem + 2**30)
_lim(resource.RLIMIT_FSIZE, 2**30)
_lim(resource.RLIMIT_CORE, 0)
del _lim, _mem
import signal
_child = os.fork()
if _child:
    # This small process stays the kernel's parent, so a notebook that kills its parent
    # (os.kill(os.getppid(), ...)) ends its own grading, not the grader. Interrupts reach the
    # kernel through the process group; this process ignores them and passes on exit status.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(_child, signal.SIGTERM))
    while True:
        try:
            _status = os.waitpid(_child, 0)[1]
            break
        except InterruptedError:
            continue
    _code = os.waitstatus_to_exitcode(_status)
    if _code < 0:
        try:
            signal.signal(-_code, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), -_code)
    os._exit(_code)
from ipykernel.kernelapp import launch_new_instance
launch_new_instance()
"""


@dataclass
class Reply:
    """What became of one execute request."""

    status: str            # "ok", "error", "timeout" (interrupted in time), "dead"
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0


def describe_exit(code: int | None) -> str:
    """A reason for a kernel that died with exit status ``code``."""
    if code is None:
        return "kernel died"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {
            "SIGKILL": " (killed: out of memory?)",
            "SIGSEGV": " (segmentation fault)",
            "SIGABRT": " (aborted: out of memory?)",
            "SIGXFSZ": " (wrote a file above the 1 GiB limit)",
            "SIGBUS": " (bus error)",
        }.get(name, "")
        return f"kernel died: killed by {name}{hint}"
    if code == 0:
        return "kernel died: the notebook shut the kernel down (exit() or quit()?)"
    return f"kernel died: exit status {code} (os._exit or a crash?)"


def _running(pid: int | None) -> bool:
    """Whether process ``pid`` exists and has not finished (a zombie has)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return data[data.rindex(b")") + 2:].split()[0] not in (b"Z", b"X")
    except (OSError, ValueError, IndexError):
        return False


class LimitedKernel:
    """One kernel process with resource limits; :meth:`run` executes code with a time limit."""

    def __init__(self, *, memory_mb: int, cwd: str | os.PathLike, env: dict | None = None,
                 log_path: str | os.PathLike | None = None, startup_timeout: float = 60.0):
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import KernelSpec

        spec = KernelSpec(
            argv=[sys.executable, "-c", _LAUNCHER, "-f", "{connection_file}",
                  "--HistoryManager.enabled=False", "--IPKernelApp.log_level=ERROR"],
            display_name="rlnotes grader", language="python", env={}, interrupt_mode="signal")

        class _Manager(KernelManager):
            @property
            def kernel_spec(self):  # our launch command, not an installed kernelspec
                return spec

        full_env = dict(os.environ if env is None else env)
        full_env["RLNOTES_GRADER_MEMORY_BYTES"] = str(int(memory_mb) * 2**20)
        self.memory_mb = memory_mb
        #: The ipykernel process (the launcher's child), once the grader has learnt it: a
        #: notebook that kills the launcher leaves the kernel running, adopted by the grader.
        self.kernel_pid: int | None = None
        self.killed = False
        self.km = _Manager()
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.exit_code: int | None = None
        self.km.start_kernel(cwd=str(cwd), env=full_env, stdout=self._log, stderr=self._log)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError as err:
            self._record_exit()
            self.shutdown()
            raise RuntimeError(f"kernel failed to start ({describe_exit(self.exit_code)}: {err})") from None

    # -- state --------------------------------------------------------------------------
    def _record_exit(self) -> None:
        proc = getattr(self.km.provisioner, "process", None) if self.km.provisioner else None
        if proc is not None and self.exit_code is None:
            self.exit_code = proc.poll()

    def alive(self) -> bool:
        if self.killed:  # the kernel may take a moment to exit on a loaded machine
            return False
        alive = self.km.is_alive() or _running(self.kernel_pid)
        if not alive:
            self._record_exit()
        return alive

    def death_reason(self) -> str:
        self._record_exit()
        return describe_exit(self.exit_code)

    def _drain_iopub(self, budget: float = 0.2) -> None:
        # Outputs are discarded: grades never depend on what the notebook printed. The budget
        # keeps a notebook that prints without end from holding the grader here.
        end = time.monotonic() + budget
        try:
            while time.monotonic() < end:
                self.kc.get_iopub_msg(timeout=0)
        except (queue.Empty, Exception):
            pass

    # -- running code -------------------------------------------------------------------
    def run(self, code: str, timeout: float, *, silent: bool = False, grace: float = 10.0) -> Reply:
        """Execute ``code``; wait at most ``timeout`` s, then interrupt (SIGINT) and wait
        ``grace`` s more for the kernel to come back. Returns a :class:`Reply`; a kernel that
        dies or ignores the interrupt is killed and gives status ``"dead"``/``"timeout"``."""
        start = time.monotonic()
        msg_id = self.kc.execute(code, silent=silent, store_history=not silent,
                                 allow_stdin=False, stop_on_error=False)
        deadline = start + max(timeout, 0.0)
        interrupted = False
        while True:
            now = time.monotonic()
            if now >= deadline:
                if interrupted:
                    self.kill()
                    return Reply("timeout", seconds=now - start, evalue="kernel killed: it "
                                 "did not respond to an interrupt")
                interrupted = True
                try:
                    self.km.interrupt_kernel()
                except Exception:
                    pass
                deadline = now + grace
            try:
                msg = self.kc.get_shell_msg(timeout=0.25)
            except queue.Empty:
                self._drain_iopub()
                if not self.alive():
                    return Reply("dead", evalue=self.death_reason(), seconds=time.monotonic() - start)
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            self._drain_iopub()
            content = msg.get("content", {})
            elapsed = time.monotonic() - start
            if interrupted:
                return Reply("timeout", content.get("ename", ""), content.get("evalue", ""), elapsed)
            if any(isinstance(p, dict) and p.get("source") == "ask_exit"
                   for p in content.get("payload") or []):
                # exit()/quit(): Jupyter would shut the kernel down now; so do we.
                self.kill()
                return Reply("dead", evalue="kernel died: the notebook shut the kernel down "
                             "(exit() or quit())", seconds=elapsed)
            if content.get("status") == "ok":
                return Reply("ok", seconds=elapsed)
            return Reply("error", str(content.get("ename", "")), str(content.get("evalue", "")),
                         elapsed)

    def pids(self) -> set:
        """The launcher's and the kernel's process ids (those known)."""
        proc = getattr(self.km.provisioner, "process", None) if self.km.provisioner else None
        return {pid for pid in (getattr(proc, "pid", None), self.kernel_pid) if pid}

    def _kill_kernel_process(self) -> None:
        if _running(self.kernel_pid):
            try:
                os.kill(self.kernel_pid, signal.SIGKILL)
            except OSError:
                pass

    def kill(self) -> None:
        self.killed = True
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        self._kill_kernel_process()
        self._record_exit()

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
        except Exception:
            pass
        if self.km.has_kernel:
            try:
                self.km.shutdown_kernel(now=True)
            except Exception:
                pass
        self._kill_kernel_process()
        try:
            self.km.cleanup_resources()
        except Exception:
            pass
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def log_tail(self, path: str | os.PathLike | None, n: int = 300) -> str:
        if not path or not Path(path).is_file():
            return ""
        data = Path(path).read_bytes()[-n:].decode("utf-8", "replace")
        return " ".join(data.split())
