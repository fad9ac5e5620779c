#!/usr/bin/env python3
"""Queries the local data lake with DuckDB, in the SQL Athena runs (`make lake`).

The lake is Parquet under LAKE_DIR (default data-lake) in the layout of the S3 lake:
committed/dt=YYYY-MM-DD/*.parquet. Two views stand in for Athena's: `committed_changes` (every
row as delivered, `dt` as text like the Glue partition) and `changes` (each change once by
eventId: the view of template.yaml, from infra/lake/changes.sql). Then it runs QUERY (SQL text),
or Q=<name> (infra/lake/<name>.sql: the template's named queries), or the summary; as a table,
or with LAKE_FORMAT=json one JSON object per row.
"""

import json
import os
import sys
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent


def main():
    lake = Path(os.environ.get("LAKE_DIR") or "data-lake")
    files = sorted(lake.glob("committed/dt=*/*.parquet"))
    if not files:
        sys.exit(
            f"make lake: no Parquet files under {lake}/committed/ yet: rows are written when the "
            "local stack rolls a file (every --lake-buffer-ms after a commit); run `make run` and "
            "commit a transaction first"
        )
    name = os.environ.get("Q") or "summary"
    sql = os.environ.get("QUERY")
    if not sql:
        path = HERE / f"{name}.sql"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in HERE.glob("*.sql") if p.stem != "changes"))
            sys.exit(f"make lake: no query named {name!r} (Q= one of: {known})")
        sql = path.read_text()
    db = duckdb.connect()
    pattern = str(lake / "committed" / "dt=*" / "*.parquet")
    db.execute(
        "CREATE VIEW committed_changes AS SELECT * FROM read_parquet("
        f"'{pattern}', hive_partitioning = true, hive_types = {{'dt': VARCHAR}})"
    )
    db.execute("CREATE VIEW changes AS " + (HERE / "changes.sql").read_text())
    try:
        result = db.sql(sql)
        if os.environ.get("LAKE_FORMAT") == "json":
            # One JSON object per row (tests read it); decimals and times as their text.
            for row in result.fetchall():
                print(json.dumps(dict(zip(result.columns, row)), default=str))
        else:
            print(result)
    except duckdb.Error as e:
        sys.exit(f"make lake: {e}")


if __name__ == "__main__":
    main()
