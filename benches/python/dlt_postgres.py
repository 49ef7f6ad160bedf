"""dlt's postgres destination over a list of records: the peer that the
`typed_postgres` bench (benches/typed.rs) measures typed tables against.

    python dlt_postgres.py RECORDS.json POSTGRES_URL WORKDIR PAGE TABLE

RECORDS.json is a list of objects; dlt loads them, in pages of PAGE as a
source would yield them, into the table TABLE of the database at
POSTGRES_URL (schema `dlt_bench`): nested objects flattened into columns,
lists into child tables, by its normaliser. Prints the seconds
`pipeline.run` took (the load itself, without Python's start-up and
imports), last.
"""

import json
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import dlt


def with_password(url: str) -> str:
    """dlt asks for a password even where the server trusts the client
    (this machine's local server): give it one it ignores."""
    parts = urlsplit(url)
    if parts.password is not None or parts.username is None:
        return url
    host = parts.netloc.split("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:unused@{host}"))


def main() -> None:
    path, url, workdir, page, table = sys.argv[1:6]
    page = int(page)
    with open(path) as f:
        records = json.load(f)

    @dlt.resource(name=table, write_disposition="append")
    def pages():
        for i in range(0, len(records), page):
            yield records[i : i + page]

    pipeline = dlt.pipeline(
        pipeline_name="bench_postgres",
        pipelines_dir=workdir + "/.dlt",
        destination=dlt.destinations.postgres(credentials=with_password(url)),
        dataset_name="dlt_bench",
    )
    start = time.perf_counter()
    info = pipeline.run(pages())
    elapsed = time.perf_counter() - start
    assert not info.has_failed_jobs, info
    print(elapsed)


if __name__ == "__main__":
    main()
