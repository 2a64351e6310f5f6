#!/usr/bin/env python3
"""bench/compare_builds.py -- every bench figure of two cnnsh builds, as
ratios measured in one run (issue 19 point 3: "nothing slower than today
on any bench figure").

    python3 bench/compare_builds.py OLD_CNNSH NEW_CNNSH [--rounds N] [--only NAME,...]
                                    [--old-bench DIR]

Both builds run the bench scripts of this tree (bench/*.lua, bench/startup.sh),
alternated within each round (old first in odd rounds, new first in even
ones) so drifts in the machine's load hit both; each run holds the bench
lock (/tmp/cnnsh-bench.lock), so no other benchmark of ours runs beside it.
A script the old build cannot run (a function it lacks) is reported as such;
with --old-bench DIR (the old tree's bench/ folder) the old build runs that
folder's version of such a script instead, and the figures whose lines and
fields both versions print are compared.

A figure is one numeric field of one JSON line; lines are matched across
runs by their string fields and by the order in which lines with the same
string fields come.  Numeric fields equal in every run (batch, threads,
byte counts) are configuration, not figures; errors and differences
(max_abs_diff, *_ulp) are correctness checks, not figures either.  Output, one JSON line per
figure:
    {"bench":"compare","script":...,"line":...,"field":...,"old":...,"new":...,
     "speed":...,"verdict":"faster|same|slower"}
speed = old/new for times (fields named ms, us, seconds or ending so;
not *_per_s) and new/old for rates (everything else), so speed > 1 means the new build is
better; "slower" is speed < 1 - TOLERANCE (the run-to-run noise of these
machines), "faster" above 1 + TOLERANCE.  A summary line closes the run.
"""
import json
import os
import statistics
import subprocess
import sys

TOLERANCE = 0.10
LOCK = "/tmp/cnnsh-bench.lock"
HERE = os.path.dirname(os.path.abspath(__file__))

# (name, arguments after the script) -- the README's settings, or a little
# shorter where a script's default takes minutes
SCRIPTS = [
    ("ops", ["ops.lua", "7"]),
    ("layers", ["layers.lua", "7"]),
    ("norm", ["norm.lua", "5"]),
    ("conv", ["conv.lua"]),
    ("conv_transpose", ["conv_transpose.lua"]),
    ("resnet", ["resnet.lua", "--steps", "5", "--sizes", "32"]),
    ("step_profile", ["step_profile.lua", "--net", "all", "--iters", "10"]),
    ("train", ["train.lua", "--steps", "40"]),
    ("bf16_step", ["bf16_step.lua", "--rounds", "5"]),
    ("conv_block", ["conv_block.lua"]),
    ("linear_block", ["linear_block.lua"]),
    ("fuse", ["fuse.lua"]),
    ("loader", ["loader.lua", "--images", "2048", "--sizes", "32", "--workers", "1,2"]),
    ("ddp", ["ddp.lua"]),
    ("startup", ["startup.sh", "30"]),
]


def is_time(field):
    """Times (lower is better): ms, us, seconds and fields ending so;
    rates such as images_per_s are not."""
    if field.endswith("_per_s"):
        return False
    return field in ("ms", "us", "s", "seconds") or field.endswith(("_ms", "_us", "_seconds"))


def run_once(cnnsh, args, bench_dir=HERE):
    """The JSON lines of one run, or None when the run failed."""
    script = os.path.join(bench_dir, args[0])
    if script.endswith(".sh"):
        cmd = ["bash", script, cnnsh] + args[1:]
    else:
        cmd = [cnnsh, script] + args[1:]
    try:
        p = subprocess.run(["flock", LOCK] + cmd, capture_output=True, text=True, timeout=900,
                           cwd=os.path.dirname(bench_dir))
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return None
    lines = []
    for text in p.stdout.splitlines():
        text = text.strip()
        if text.startswith("{"):
            try:
                lines.append(json.loads(text))
            except ValueError:
                pass
    return lines


def is_accuracy(field):
    """Errors and differences (max_abs_diff, worst_ulp): correctness
    checks the scripts print beside their figures, not speed."""
    return any(w in field for w in ("diff", "err", "ulp"))


def figures(lines):
    """{(line key, field): value} for the numeric fields of lines."""
    out, seen = {}, {}
    for d in lines:
        tag = tuple(sorted((k, v) for k, v in d.items() if isinstance(v, str)))
        seen[tag] = seen.get(tag, 0) + 1
        key = (tag, seen[tag])
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not is_accuracy(k):
                out[(key, k)] = v
    return out


def line_name(key):
    tag, nth = key
    text = ",".join(f"{k}={v}" for k, v in tag if k != "bench")
    return text + (f"#{nth}" if nth > 1 else "")


def compare(name, runs_old, runs_new):
    results = []
    common = set(runs_old[0]).intersection(*runs_old[1:], *runs_new)
    for fig in sorted(common, key=lambda f: (line_name(f[0]), f[1])):
        olds = [r[fig] for r in runs_old]
        news = [r[fig] for r in runs_new]
        if len(set(olds + news)) == 1:
            continue  # configuration
        o, n = statistics.median(olds), statistics.median(news)
        if o <= 0 or n <= 0:
            continue
        speed = o / n if is_time(fig[1]) else n / o
        verdict = "slower" if speed < 1 - TOLERANCE else "faster" if speed > 1 + TOLERANCE else "same"
        results.append({"bench": "compare", "script": name, "line": line_name(fig[0]),
                        "field": fig[1], "old": o, "new": n, "speed": round(speed, 3),
                        "verdict": verdict})
    return results


def main():
    argv = sys.argv[1:]
    rounds, only, old_bench = 3, None, None
    pos = []
    i = 0
    while i < len(argv):
        if argv[i] == "--rounds":
            rounds, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--only":
            only, i = set(argv[i + 1].split(",")), i + 2
        elif argv[i] == "--old-bench":
            old_bench, i = os.path.abspath(argv[i + 1]), i + 2
        else:
            pos.append(argv[i])
            i += 1
    if len(pos) != 2:
        sys.exit("usage: compare_builds.py OLD_CNNSH NEW_CNNSH [--rounds N] [--only NAME,...]"
                 " [--old-bench DIR]")
    old, new = (os.path.abspath(p) for p in pos)
    counts = {"faster": 0, "same": 0, "slower": 0}
    for name, args in SCRIPTS:
        if only and name not in only:
            continue
        runs = {"old": [], "new": []}
        failed = set()
        old_dir = HERE
        if old_bench and run_once(old, args) is None:
            old_dir = old_bench  # the old build runs its own version of the script
        for r in range(rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for which in order:
                lines = (run_once(old, args, old_dir) if which == "old" else run_once(new, args))
                if lines is None:
                    failed.add(which)
                else:
                    runs[which].append(figures(lines))
        if failed or not runs["old"] or not runs["new"]:
            print(json.dumps({"bench": "compare", "script": name,
                              "failed": sorted(failed)}), flush=True)
            continue
        if old_dir != HERE:
            print(json.dumps({"bench": "compare", "script": name,
                              "old_script": os.path.join(old_dir, args[0])}), flush=True)
        for res in compare(name, runs["old"], runs["new"]):
            counts[res["verdict"]] += 1
            print(json.dumps(res), flush=True)
    print(json.dumps({"bench": "compare_summary", "rounds": rounds, "tolerance": TOLERANCE,
                      **counts}), flush=True)


if __name__ == "__main__":
    main()
