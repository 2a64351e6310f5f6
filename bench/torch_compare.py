# bench/torch_compare.py -- cnnsh against PyTorch's CPU build as ratios taken
# in one run (issue 19 point 3, issue 13 point 13).  Run BY HAND only, with a
# Python that has torch (see bench/torch_step.py); never in tests or CI.
#
#   /tmp/torchvenv/bin/python bench/torch_compare.py [--cnnsh build/repl/cnnsh]
#       [--rounds 3] [--threads 2] [--steps 10] [--resnet-steps 2] [--skip-resnet]
#       [--autocast] [--with-eval]
#
# Each round runs, back to back, cnnsh's script and bench/torch_step.py on
# the same figure with the same OMP_NUM_THREADS, holding the bench lock
# (/tmp/cnnsh-bench.lock) over each network's pairs so both halves see the
# same machine:
#   * the example network, training at batch 64 (and with --with-eval,
#     evaluation at batch 1000) (cnnsh: bench/train.lua; synthetic inputs);
#   * ResNet-18, batch 16, training and evaluation at 32x32 and 224x224
#     (cnnsh: bench/resnet.lua);
#   * with --autocast, the example network's training step under bf16
#     autocast on both sides (cnnsh: bench/train.lua --autocast bf16).
# The order inside a pair alternates between rounds.  Prints every figure's
# JSON line as it comes and each round's ratio ("cnnsh_vs_pytorch_round"),
# then one JSON line per figure with the
# cnnsh/PyTorch ratio of each round, their median, min and max.
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = "/tmp/cnnsh-bench.lock"


def json_lines(cmd, env):
    """Run cmd and return the JSON objects it printed, one per line."""
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def cnnsh_key(r):
    """The figure a cnnsh JSON line measures, or None."""
    if r.get("bench") in ("train", "eval") and r.get("source") == "synthetic":
        return (r["bench"], "fmnist", r.get("autocast", "off"))
    if r.get("bench") == "resnet18":
        return ("resnet18_" + r["mode"], r["size"], "off")
    return None


def torch_key(r):
    if r.get("bench") in ("train", "eval"):
        return (r["bench"], "fmnist", r.get("autocast", "off"))
    return ("resnet18_" + r["mode"], r["size"], "off")


def pairs(a):
    """(name, cnnsh command, torch command) for each comparison."""
    py, step = sys.executable, os.path.join(HERE, "torch_step.py")
    t = ["--threads", str(a.threads)]
    only = [] if a.with_eval else ["--train-only"]
    out = [("fmnist",
            [a.cnnsh, os.path.join(HERE, "train.lua"), "--steps", str(a.steps)] + only,
            [py, step, "--net", "fmnist", "--steps", str(a.steps)] + only + t)]
    if a.autocast:
        out.append(("fmnist-bf16",
                    [a.cnnsh, os.path.join(HERE, "train.lua"), "--steps", str(a.steps), "--autocast", "bf16"],
                    [py, step, "--net", "fmnist", "--steps", str(a.steps), "--autocast", "bf16"] + t))
    if not a.skip_resnet:
        for size, steps in (("32", a.resnet_steps * 4), ("224", a.resnet_steps)):
            out.append(("resnet18-" + size,
                        [a.cnnsh, os.path.join(HERE, "resnet.lua"), "--sizes", size, "--steps", str(steps)],
                        [py, step, "--net", "resnet18", "--sizes", size, "--resnet-steps", str(steps)] + t))
    return out


def main():
    p = argparse.ArgumentParser(description="cnnsh / PyTorch speed ratios, alternated in one run")
    p.add_argument("--cnnsh", default="build/repl/cnnsh")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--resnet-steps", type=int, default=2, help="at 224x224; 4x that at 32x32")
    p.add_argument("--skip-resnet", action="store_true")
    p.add_argument("--autocast", action="store_true", help="also the bf16 autocast training step")
    p.add_argument("--with-eval", action="store_true", help="also the example network's evaluation")
    a = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    ratios = {}
    groups = {}
    for pair in pairs(a):
        groups.setdefault(pair[0].split("-")[0], []).append(pair)
    for rnd in range(a.rounds):
        for group in groups.values():
            with open(LOCK, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                for name, cnnsh_cmd, torch_cmd in group:
                    order = [("cnnsh", cnnsh_cmd), ("torch", torch_cmd)]
                    got = {}
                    for who, cmd in (order if rnd % 2 == 0 else order[::-1]):
                        got[who] = json_lines(cmd, env)
                    mine = {cnnsh_key(r): r for r in got["cnnsh"] if cnnsh_key(r)}
                    for r in got["torch"]:
                        k = torch_key(r)
                        if k in mine:
                            ratio = mine[k]["images_per_s"] / r["images_per_s"]
                            ratios.setdefault(k, []).append(ratio)
                            # each round's ratio at once: a run cut short still says something
                            print(json.dumps({"bench": "cnnsh_vs_pytorch_round", "figure": k[0],
                                              "what": k[1], "autocast": k[2], "round": rnd + 1,
                                              "ratio": round(ratio, 3)}), flush=True)
    for (fig, what, autocast), rs in ratios.items():
        print(json.dumps({"bench": "cnnsh_vs_pytorch", "figure": fig, "what": what, "autocast": autocast,
                          "threads": a.threads, "rounds": [round(x, 3) for x in rs],
                          "median": round(statistics.median(rs), 3),
                          "min": round(min(rs), 3), "max": round(max(rs), 3)}), flush=True)


if __name__ == "__main__":
    main()
