"""What the workers' agreement costs at the start of a multi-worker ``fcn.train``: the chief's
settings sent to every worker (``distribute.sync_text`` of ``TrainConfig.to_json()``, then the
count of workers that disagree) and the check that every worker has the chief's training list
(``distribute.check_same_files`` on a list of ``--pairs`` names: SBD train_aug's 10,582 by
default). Two workers on 127.0.0.1 (``local_cluster``), each pinned to a core of its own; each
call is timed ``--repeats`` times after a warm-up, and the chief prints the medians (ms).

    python benchmarks/worker_agreement.py [--pairs 10582] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def worker(args) -> None:
    """One worker: time the two agreements; the chief prints one JSON line."""
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    os.sched_setaffinity(0, {index % os.cpu_count()})
    import tensorflow as tf

    from fcn.data import SegmentationFiles
    from fcn.device import cpu_summary
    from fcn.training import distribute
    from fcn.training.config import TrainConfig

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ids = [f"2008_{i:06d}" for i in range(args.pairs)]
    files = SegmentationFiles(
        tuple(f"/data/JPEGImages/{i}.jpg" for i in ids), tuple(f"/data/cls/{i}.mat" for i in ids)
    )
    settings = json.dumps(TrainConfig().to_json())

    def settings_agreement():
        text = distribute.sync_text(strategy, settings if index == 0 else "")
        distribute.count_workers(strategy, text != settings)

    timings = {}
    for name, call in [
        ("settings", settings_agreement),
        ("files", lambda: distribute.check_same_files(strategy, files)),
    ]:
        call()  # warm-up
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - start)
        timings[name] = round(1000 * statistics.median(seconds), 2)
    if index == 0:
        print(cpu_summary(), file=sys.stderr)
        print(json.dumps({"pairs": args.pairs, "settings_bytes": len(settings), **timings}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10582)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    from fcn.training.distribute import local_cluster

    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", "--pairs", str(args.pairs),
             "--repeats", str(args.repeats)],
            env={**os.environ, "TF_CONFIG": config}, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for config in local_cluster(2)
    ]
    outputs = [process.communicate()[0] for process in processes]
    if any(process.returncode for process in processes):
        sys.exit("a worker failed: see its error above")
    result = json.loads(outputs[0].strip().splitlines()[-1])
    print(
        f"settings ({result['settings_bytes']} bytes of JSON) agreed in {result['settings']} ms; "
        f"{result['pairs']} training pairs checked in {result['files']} ms (medians)"
    )


if __name__ == "__main__":
    main()
