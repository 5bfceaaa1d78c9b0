"""--baseline REV for bench/compare.py: uring-fwd built from another git revision, with
the meson options of the uring-fwd binary's build, cached per commit. Also the helpers
that read a meson build directory. Standard library only."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compare_proc import log

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# uring-fwd built from another git revision (--baseline REV) and started exactly like
# uring-fwd: a refactor is checked for regressions by running both in one interleaved run.
BASE_PEER = "uring-fwd-base"
BASELINE_DIR = REPO / "build-bench-baseline"
# The meson options that decide what the compiler emits and how the binary is linked. The
# baseline build copies each one's value from the build of the uring-fwd binary, so that
# the two binaries differ in their source only.
MIRRORED_OPTIONS = ("buildtype", "optimization", "debug", "b_ndebug", "b_lto", "b_pgo",
                    "b_pie", "b_staticpic", "b_sanitize", "b_coverage", "b_asneeded", "b_lundef",
                    "cpp_std", "cpp_args", "cpp_link_args", "cpp_rtti", "cpp_eh", "cpp_debugstl",
                    "default_library", "prefer_static", "strip", "unity", "unity_size",
                    "warning_level", "werror")


def build_baseline(ctx) -> None:
    """Build uring-fwd from --baseline REV into build-bench-baseline/<commit>/ with the meson
    options of the uring-fwd binary's build. Cached per commit: a second run finds ninja with
    nothing to do. On failure ctx.base_err says why and uring-fwd-base shows n/a."""
    rev = ctx.args.baseline
    try:
        r = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if r.returncode != 0:
            ctx.base_err = f"--baseline {rev!r} is not a commit of {REPO}"
            return
        ctx.base_commit = r.stdout.strip()
        ctx.base_short = _git("rev-parse", "--short", ctx.base_commit).stdout.strip()
        ctx.base_bin = _build_baseline(ctx, BASELINE_DIR / ctx.base_commit[:12])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        ctx.base_err = f"baseline build of {rev} failed: {e}"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          timeout=60)


def _build_baseline(ctx, top: Path) -> Path:
    src, build = top / "src", top / "build"
    if not src.is_dir():
        log(f"{BASE_PEER}: extracting {ctx.base_short} into {shown_path(src)}")
        top.mkdir(parents=True, exist_ok=True)
        # Extract beside src and rename, so that an interrupted extraction is never taken
        # for a cached tree.
        part = Path(tempfile.mkdtemp(prefix="src-", dir=top))
        archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "--format=tar",
                                    ctx.base_commit], stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "-C", str(part)], stdin=archive.stdout,
                             capture_output=True, text=True, timeout=300)
        archive.stdout.close()
        if archive.wait(timeout=60) != 0 or tar.returncode != 0:
            shutil.rmtree(part, ignore_errors=True)
            raise RuntimeError(f"git archive | tar -x failed: {tar.stderr.strip()[-300:]}")
        part.rename(src)

    main_build = meson_build_dir(ctx.uring_bin)
    main_opts = meson_options(main_build) if main_build else {}
    if not main_opts:
        log(f"{BASE_PEER}: no meson build found for {ctx.uring_bin or 'uring-fwd'}; "
            "building the baseline with the project's default options")
    want = {k: main_opts[k] for k in MIRRORED_OPTIONS if k in main_opts}
    # buildtype, optimization and debug all go in although meson warns that buildtype and
    # the pair override each other: meson 1.0 keeps buildtype=debugoptimized beside an
    # explicit optimization=3, so no one of them implies the others.
    # The project's own options too, where the baseline has them; the tests are not needed.
    own = set(re.findall(r"option\(\s*'(\w+)'", "".join(
        f.read_text() for f in (src / "meson_options.txt", src / "meson.options") if f.is_file())))
    want.update({k: v for k, v in main_opts.get("user", {}).items() if k in own})
    if "tests" in own:
        want["tests"] = False
    cxx = compiler_of(main_build) if main_build else None
    setup = {"options": want, "cxx": cxx}

    # A build set up with other options or another compiler is set up afresh.
    stamp = top / "setup.json"
    try:
        done = json.loads(stamp.read_text())
    except (OSError, ValueError):
        done = None
    if done != setup or not (build / "build.ninja").is_file():
        log(f"{BASE_PEER}: meson setup {shown_path(build)} ({', '.join(f'{k}={meson_value(v)}' for k, v in want.items())})")
        shutil.rmtree(build, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        env = dict(os.environ, CXX=shlex.join(cxx)) if cxx else None
        _build_step(["meson", "setup", str(build), str(src)]
                    + [f"-D{k}={meson_value(v)}" for k, v in want.items()], env=env, timeout=300)
        stamp.write_text(json.dumps(setup, indent=2, sort_keys=True) + "\n")

    log(f"{BASE_PEER}: ninja -C {shown_path(build)} engine/uring-fwd")
    jobs = ["-j", str(ctx.args.build_jobs)] if ctx.args.build_jobs else []
    out = _build_step(["ninja", "-C", str(build), *jobs, "engine/uring-fwd"], timeout=1800)
    if "no work to do" in out:
        log(f"{BASE_PEER}: {ctx.base_short} already built")

    # Proof, not trust: the option values of the two builds as meson reports them.
    got = meson_options(build)
    differ = [f"{k}: {got.get(k)!r} here, {main_opts[k]!r} in {shown_path(main_build)}"
              for k in MIRRORED_OPTIONS if k in main_opts and got.get(k) != main_opts[k]]
    if differ:
        raise RuntimeError("options differ from the uring-fwd build: " + "; ".join(differ))
    ctx.base_options = {k: got[k] for k in MIRRORED_OPTIONS if k in got}
    binary = build / "engine" / "uring-fwd"
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"{shown_path(binary)} missing after the build")
    return binary


def _build_step(argv: list[str], *, timeout: float, env: dict | None = None) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        print(out[-4000:], file=sys.stderr)
        errors = [ln.strip() for ln in out.splitlines() if re.search(r"\berror\b", ln, re.I)]
        why = " | ".join(errors[-2:])[-300:] if errors else out.strip()[-300:]
        raise RuntimeError(f"{shlex.join(argv[:3])} … exited {r.returncode}: {why}")
    return out


def meson_build_dir(binary: Path | None) -> Path | None:
    """The meson build directory that produced binary (<build>/engine/uring-fwd), if any."""
    if binary and (binary.parent.parent / "meson-info").is_dir():
        return binary.parent.parent
    return None


def meson_options(build: Path) -> dict:
    """{name: value} of a meson build's options; the project's own are under "user"."""
    opts: dict = {}
    try:
        for o in json.loads((build / "meson-info" / "intro-buildoptions.json").read_text()):
            if o.get("section") == "user":
                opts.setdefault("user", {})[o["name"]] = o["value"]
            elif o.get("machine") != "build":  # the build machine's options are for cross builds
                opts[o["name"]] = o["value"]
    except (OSError, ValueError):
        pass
    return opts


def meson_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return repr(v)  # meson reads "['a', 'b']" as an array
    return str(v)


def compiler_of(build: Path) -> list[str] | None:
    """The C++ compiler command (ccache included) that built uring-fwd in build."""
    try:
        for t in json.loads((build / "meson-info" / "intro-targets.json").read_text()):
            if t.get("name") == "uring-fwd":
                for s in t.get("target_sources", []):
                    if s.get("language") == "cpp" and s.get("compiler"):
                        return s["compiler"]
    except (OSError, ValueError):
        pass
    return None


def shown_path(path: Path) -> str:
    """path relative to the repository when it lies inside it: reports get committed, and
    one machine's absolute paths mean nothing on another."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)
