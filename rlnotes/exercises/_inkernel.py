"""Code the grader runs inside a student's kernel (sent as text, never imported there).

Before any student code runs, the grader executes this file's source in the kernel with a
private globals dict (``PARAMS``, a dict of plain values, and a private copy of the builtins);
that "prelude" leaves a state module in ``sys.modules`` whose ``run(params)`` the later phases
call through a chain of attribute lookups that starts from a literal, so that names the
notebook defines (an ``exec`` of its own, say) cannot intercept them. Every phase writes its
result as JSON to ``PARAMS["out"]``, a file the grader reads afterwards (the notebook's printed
output is never read). Phases:

``prelude``  before any student code: remember the callables of a few core modules and the
             import machinery, to spot monkeypatching later.
``load``     after the notebook ran: look for tampering (patched core modules, functions
             defined in the notebook planted into library or rlnotes modules, redefined check
             names in the user namespace, a changed import system), undo what can be undone,
             purge ``rlnotes*`` and the check modules from ``sys.modules`` and load the check
             modules afresh from the source text the grader sent.
``check``    call the fresh check's undecorated function (``.raw``) on the names the master
             notebook's check cell passes, evaluated in the user namespace.
``final``    look again for tampering done while the checks ran.
"""

import builtins
import importlib
import json
import sys
import threading
import types

# Taken while the prelude runs, before any student code: later phases write their results with
# these even if the notebook replaced json.dumps (the grader's globals hold a private copy of
# the builtins too, so a patched builtins.open or exec does not reach this code either).
_dumps = json.dumps
_WATCHED_MODULES = ["builtins", "math", "operator", "functools", "json", "importlib", "copy",
                    "numpy", "numpy.linalg", "numpy.random", "numpy.testing"]
_WATCHED_PREFIXES = ("rlnotes", "numpy", "torch", "math", "builtins", "json", "importlib",
                     "functools", "operator", "random", "gymnasium", "copy", "types", "inspect")
# Builtins that IPython/ipykernel rebind on every request.
_VOLATILE = {"_", "__", "___", "input", "raw_input", "exit", "quit", "get_ipython", "display",
             "help", "__IPYTHON__"}


def _write(result):
    with open(PARAMS["out"], "w", encoding="utf-8") as fh:  # noqa: F821
        fh.write(_dumps(result))


_STATE = []


def _state():
    return _STATE[0]


def _callables(module):
    out = {}
    for key, value in list(vars(module).items()):
        if key in _VOLATILE or isinstance(value, types.ModuleType):
            continue
        if callable(value):
            out[key] = value
    return out


def _cell_origin(obj, cell_dirs):
    """True when ``obj`` is a function or class defined in a notebook cell (or by exec), or an
    instance of such a class."""
    func = getattr(obj, "__func__", obj) if isinstance(obj, types.MethodType) else obj
    if isinstance(func, types.FunctionType):
        if func.__module__ in ("__main__", None):
            return True
        name = func.__code__.co_filename
        return name.startswith("<ipython-input") or any(name.startswith(d) for d in cell_dirs)
    cls = func if isinstance(func, type) else type(func)
    return getattr(cls, "__module__", "") == "__main__"


def _same(a, b, depth=0):
    """Whether ``a`` (from the notebook's kernel) is the same code as ``b`` (fresh)."""
    if a is b:
        return True
    if depth > 4:
        return True
    if isinstance(a, (staticmethod, classmethod)) and isinstance(b, (staticmethod, classmethod)):
        return _same(a.__func__, b.__func__, depth + 1)
    if isinstance(a, property) and isinstance(b, property):
        return all(_same(getattr(a, k), getattr(b, k), depth + 1) for k in ("fget", "fset", "fdel"))
    if isinstance(a, types.FunctionType) and isinstance(b, types.FunctionType):
        if a.__code__ != b.__code__:
            return False
        if repr(a.__defaults__) != repr(b.__defaults__):
            return False
        for attr in ("raw", "__wrapped__"):
            ra, rb = getattr(a, attr, None), getattr(b, attr, None)
            if (ra is None) != (rb is None):
                return False
            if ra is not None and not _same(ra, rb, depth + 1):
                return False
        for ca, cb in zip(a.__closure__ or (), b.__closure__ or ()):
            try:
                va, vb = ca.cell_contents, cb.cell_contents
            except ValueError:
                continue
            if isinstance(va, types.FunctionType) or isinstance(vb, types.FunctionType):
                if not _same(va, vb, depth + 1):
                    return False
        return True
    if isinstance(a, type) and isinstance(b, type):
        if a.__qualname__ != b.__qualname__:
            return False
        da, db = vars(a), vars(b)
        for key in set(da) | set(db):
            va, vb = da.get(key), db.get(key)
            if isinstance(va, (types.FunctionType, staticmethod, classmethod, property)) or \
                    isinstance(vb, (types.FunctionType, staticmethod, classmethod, property)):
                if va is None or vb is None or not _same(va, vb, depth + 1):
                    return False
        return True
    if isinstance(a, types.FunctionType) != isinstance(b, types.FunctionType):
        return False
    wa, wb = getattr(a, "__wrapped__", None), getattr(b, "__wrapped__", None)
    if wa is not None and wb is not None:
        return _same(wa, wb, depth + 1)
    return type(a) is type(b)


def _is_ours(name):
    return name == "rlnotes" or name.startswith("rlnotes.") or name in PARAMS["check_modules"]  # noqa: F821


def _snapshot_extra():
    return {
        "meta_path": list(sys.meta_path),
        "path_hooks": list(sys.path_hooks),
        "path": list(sys.path),
    }


def _prelude():
    state = types.ModuleType(PARAMS["state"])  # noqa: F821
    sys.modules[PARAMS["state"]] = state  # noqa: F821
    _STATE.append(state)
    state.run = _run
    state.recursion_limit = sys.getrecursionlimit()
    state.watch = {}
    for name in _WATCHED_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        state.watch[name] = (module, _callables(module))
    state.extra = _snapshot_extra()
    state.threads = set(sys._current_frames())
    dirs = []
    try:
        ip = get_ipython()  # noqa: F821
        import os
        dirs.append(os.path.dirname(ip.compile.get_code_name("", "", 0)))
    except Exception:
        pass
    try:
        from ipykernel.compiler import get_tmp_directory
        dirs.append(get_tmp_directory())
    except Exception:
        pass
    state.cell_dirs = [d for d in dirs if d]
    try:
        state.shell = get_ipython()  # noqa: F821
    except Exception:
        state.shell = None
    state.findings = []
    import os as _os
    _write({"ok": True, "pid": _os.getpid()})


def _add(findings, scope, message):
    if [scope, message] not in findings:
        findings.append([scope, message])


def _compare_watch(state, watch, findings, restore):
    for name, (module, before) in watch.items():
        now = vars(module)
        for key, value in before.items():
            current = now.get(key, value)
            if current is not value:
                _add(findings, "*", f"{name}.{key} was replaced")
                if restore:
                    setattr(module, key, value)


def _compare_extra(state, extra, findings, restore):
    if list(sys.meta_path) != extra["meta_path"]:
        _add(findings, "*", "sys.meta_path (the import system) was changed")
        if restore:
            sys.meta_path[:] = extra["meta_path"]
    if list(sys.path_hooks) != extra["path_hooks"]:
        _add(findings, "*", "sys.path_hooks (the import system) was changed")
        if restore:
            sys.path_hooks[:] = extra["path_hooks"]
    if restore:
        sys.path[:] = extra["path"]
        sys.path_importer_cache.clear()


def _scan_planted(state, findings, checks):
    """Functions or classes defined in the notebook that sit in library or rlnotes modules."""
    for mname, module in list(sys.modules.items()):
        if module is None or not mname.startswith(_WATCHED_PREFIXES) and not _is_ours(mname):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for key, value in items:
            if isinstance(value, types.ModuleType) or not callable(value):
                continue
            if _cell_origin(value, state.cell_dirs):
                scope = key if key in checks else "*"
                _add(findings, scope, f"{mname}.{key} was replaced by code from the notebook")
            elif isinstance(value, type) and getattr(value, "__module__", "").startswith(_WATCHED_PREFIXES):
                for attr, member in list(vars(value).items()):
                    if callable(member) and _cell_origin(member, state.cell_dirs):
                        _add(findings, "*", f"{mname}.{key}.{attr} was replaced by code from the notebook")


def _cell_thread(frame, cell_dirs):
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<ipython-input") or any(name.startswith(d) for d in cell_dirs):
            return frame.f_code.co_name
        frame = frame.f_back
    return None


def _scan_threads(state, findings):
    """Threads running code from the notebook: they could rewrite results or patch the checks
    while the checks run, so they make every result of the notebook untrusted."""
    me = threading.get_ident()
    for ident, frame in list(sys._current_frames().items()):
        if ident == me or ident in state.threads:
            continue
        where = _cell_thread(frame, state.cell_dirs)
        if where is not None:
            _add(findings, "*", f"the notebook left a thread running (in {where}); threads "
                                "that outlive their cell are not allowed")


def _load():
    state = _state()
    checks = PARAMS["checks"]  # noqa: F821  {check name: module name}
    findings = []
    sys.settrace(None)
    sys.setprofile(None)
    threading.settrace(None)
    threading.setprofile(None)
    sys.setrecursionlimit(max(state.recursion_limit, 1000))
    _compare_watch(state, state.watch, findings, restore=True)
    _compare_extra(state, state.extra, findings, restore=True)
    _scan_planted(state, findings, checks)
    _scan_threads(state, findings)
    # Purge rlnotes and the check modules, then load them afresh.
    old = {n: m for n, m in list(sys.modules.items()) if _is_ours(n)}
    for name in old:
        del sys.modules[name]
    importlib.invalidate_caches()
    errors = {}
    fresh_modules = {}
    for spec in PARAMS["sources"]:  # noqa: F821
        module = types.ModuleType(spec["name"])
        module.__file__ = spec["path"]
        module.__package__ = spec["package"]
        try:
            exec(compile(spec["source"], spec["path"], "exec"), module.__dict__)
        except BaseException as err:  # noqa: BLE001
            errors[spec["name"]] = f"{type(err).__name__}: {err}"
            continue
        fresh_modules[spec["name"]] = module
    state.fresh_checks = {}
    for check, modname in checks.items():
        module = fresh_modules.get(modname)
        func = getattr(module, check, None) if module is not None else None
        if func is not None and hasattr(func, "raw"):
            state.fresh_checks[check] = func
    # Compare what the notebook's kernel had with fresh copies.
    for name, module in old.items():
        fresh = fresh_modules.get(name)
        if fresh is None:
            try:
                fresh = importlib.import_module(name)
            except BaseException:  # noqa: BLE001
                continue
        before, after = vars(module), vars(fresh)
        for key, value in list(before.items()):
            if key.startswith("__") or isinstance(value, types.ModuleType):
                continue
            if key == "CHECKS" and isinstance(value, dict) and isinstance(after.get(key), dict):
                for cname, cfunc in list(value.items()):
                    ref = state.fresh_checks.get(cname, after[key].get(cname))
                    if ref is not None and not _same(cfunc, ref):
                        _add(findings, cname if cname in checks else "*",
                             f"{name}.CHECKS[{cname!r}] was replaced")
                continue
            if key not in after:
                continue
            ref = after[key]
            if key in state.fresh_checks:
                ref = state.fresh_checks[key]
            if (callable(value) or callable(ref)) and not _same(value, ref):
                scope = key if key in checks else "*"
                _add(findings, scope, f"{name}.{key} was modified")
    # Check names redefined in the user namespace.
    ns = state.shell.user_ns if state.shell is not None else {}
    for check in checks:
        if check in ns and check in state.fresh_checks and not _same(ns[check], state.fresh_checks[check]):
            _add(findings, check, f"the notebook redefines {check}")
    state.findings = findings
    state.watch_after = {n: (m, _callables(m)) for n, (m, _) in state.watch.items()}
    for name, module in list(sys.modules.items()):
        if _is_ours(name) and isinstance(module, types.ModuleType):
            state.watch_after[name] = (module, _callables(module))
    for name, module in fresh_modules.items():
        state.watch_after["fresh:" + name] = (module, _callables(module))
    state.extra_after = _snapshot_extra()
    _write({"findings": findings, "errors": errors, "loaded": sorted(state.fresh_checks)})


def _where(err, cell_dirs):
    tb = err.__traceback__
    last = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.startswith("<ipython-input") or any(name.startswith(d) for d in cell_dirs):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    return f" (in {last.tb_frame.f_code.co_name}, line {last.tb_lineno} of its cell)"


def _one_line(text, limit=400):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check():
    state = _state()
    name = PARAMS["check"]  # noqa: F821
    func = state.fresh_checks.get(name)
    if func is None:
        _write({"passed": False, "detail": f"grader error: could not load {name}"})
        return
    ns = state.shell.user_ns if state.shell is not None else {}
    args, kwargs = [], {}
    try:
        for expr in PARAMS["args"]:  # noqa: F821
            args.append(eval(expr, ns))
        for key, expr in PARAMS["kwargs"].items():  # noqa: F821
            kwargs[key] = eval(expr, ns)
    except BaseException as err:  # noqa: BLE001
        _write({"passed": False, "kind": "missing",
                "detail": _one_line(f"{type(err).__name__}: {err}")})
        return
    try:
        func.raw(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001
        kind = type(err).__name__
        if kind == "ExerciseFailed":
            detail = getattr(err, "message", str(err))
            hint = getattr(err, "hint", None)
            if hint:
                detail = f"{detail} Hint: {hint}"
            credit = getattr(err, "credit", 0.0)
            credit = float(credit) if isinstance(credit, (int, float)) and 0 <= credit < 1 else 0.0
            _write({"passed": False, "kind": "failed", "detail": _one_line(detail),
                    "credit": credit})
        elif isinstance(err, NotImplementedError):
            _write({"passed": False, "kind": "not done",
                    "detail": "not done: the solution still raises NotImplementedError"})
        elif isinstance(err, MemoryError):
            _write({"passed": False, "kind": "error", "detail": _one_line(
                f"out of memory: the solution went past the memory limit (MemoryError"
                f"{_where(err, state.cell_dirs)})")})
        else:
            _write({"passed": False, "kind": "error",
                    "detail": _one_line(f"error: {kind}: {err}{_where(err, state.cell_dirs)}")})
        return
    _write({"passed": True, "kind": "passed", "detail": ""})


def _final():
    state = _state()
    findings = []
    for name, (module, before) in state.watch_after.items():
        now = vars(module)
        for key, value in before.items():
            if now.get(key, value) is not value:
                shown = name[len("fresh:"):] if name.startswith("fresh:") else name
                _add(findings, "*", f"{shown}.{key} was replaced while the checks ran")
    if list(sys.meta_path) != state.extra_after["meta_path"]:
        _add(findings, "*", "sys.meta_path was changed while the checks ran")
    _scan_threads(state, findings)
    _write({"findings": findings})


def _run(params):
    """Entry point of the phases after the prelude (called through the state module)."""
    global PARAMS
    PARAMS = params
    {"load": _load, "check": _check, "final": _final}[params["phase"]]()


if PARAMS["phase"] == "prelude":  # noqa: F821
    _prelude()
