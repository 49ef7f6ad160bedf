"""dlt's filesystem destination writing a Delta table: the peer that
delta.rs (section `dlt`) measures DeltaSink against.

    python dlt_delta.py LAUNCHES.json WORKDIR

LAUNCHES.json is a list of launch objects; dlt loads them, in pages of 500
as a source would yield them, into a Delta table under WORKDIR. Prints the
seconds `pipeline.run` took (the load itself, without Python's start-up and
imports), last.
"""

import json
import sys
import time

import dlt


def main() -> None:
    path, workdir = sys.argv[1], sys.argv[2]
    with open(path) as f:
        launches = json.load(f)

    @dlt.resource(name="launches", table_format="delta", write_disposition="append")
    def pages():
        for i in range(0, len(launches), 500):
            yield launches[i : i + 500]

    pipeline = dlt.pipeline(
        pipeline_name="bench_delta",
        pipelines_dir=workdir + "/.dlt",
        destination=dlt.destinations.filesystem(bucket_url=workdir + "/lake"),
        dataset_name="bench",
    )
    start = time.perf_counter()
    info = pipeline.run(pages())
    elapsed = time.perf_counter() - start
    assert not info.has_failed_jobs, info
    print(elapsed)


if __name__ == "__main__":
    main()
