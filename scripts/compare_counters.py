#!/usr/bin/env python3
"""scripts/compare_counters.py: the emulator's memory counters against Nsight Compute's on a GPU.

Chapter 10 (the GPU and the emulator; the counters are kernels/cuda/simt_counters.h). Read
before: scripts/gpu.sh (its `counters` step makes the two inputs), lab/counters.cpp.

    scripts/compare_counters.py EMULATOR_JSONL NCU_DIR [--out REPORT.md]

EMULATOR_JSONL holds `brrr kernel-lab OP --device emulator --mode counters --json` rows; NCU_DIR
holds one CSV per (op, size, variant), `ncu --csv --metrics ...` over `brrr kernel-lab OP
--device cuda --mode check --variant V --size S`, named OP@SIZE@VARIANT.csv (SIZE with its spaces
as underscores). Each CSV's metrics are summed over the kernels it profiled (the variant's
launches) and compared with the emulator's row:
  - global requests and sectors, loads and stores: must be equal;
  - shared wavefronts less bank conflicts (ncu's ideal) against the emulator's ideal: must be equal;
  - bank conflicts: ncu's counter is known to count more than the conflicts alone, so the
    difference is reported, not judged.
Prints a markdown table (and writes it to --out); exit status 1 when a count that must be equal
is not, 0 otherwise.
"""
import argparse
import csv
import json
import os
import sys

EXACT = [
    ("global ld requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    ("global ld sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    ("global st requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    ("global st sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
]
# What gpu.sh asks ncu for: the four above and the shared-memory ones.
METRICS = [m for _, m in EXACT] + [
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
]


def file_name(op, size, variant):
    return f"{op}@{size.replace(' ', '_')}@{variant}.csv"


def ncu_sums(path):
    """The metrics of every kernel in an `ncu --csv` file, summed by name; None if it has none."""
    sums = {}
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own lines ("==PROF==") are not CSV
    for row in csv.DictReader(lines):
        name, value = row.get("Metric Name"), row.get("Metric Value")
        if not name or value is None:
            continue
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            continue
        sums[name] = sums.get(name, 0.0) + number
    return sums or None


def compare(emulator_rows, ncu_dir):
    lines = ["| op | size | variant | count | emulator | ncu | verdict |", "|---|---|---|---|---|---|---|"]
    failed = False
    for row in emulator_rows:
        if not row.get("ran"):
            continue
        path = os.path.join(ncu_dir, file_name(row["op"], row["size"], row["variant"]))
        where = f"| {row['op']} | {row['size']} | {row['variant']} "
        if not os.path.exists(path):
            lines.append(where + "| - | - | - | no ncu profile |")
            continue
        sums = ncu_sums(path)
        if sums is None:
            lines.append(where + "| - | - | - | ncu profiled no kernel |")
            failed = True
            continue
        for label, metric in EXACT:
            ours, theirs = row[metric], sums.get(metric)
            ok = theirs is not None and int(theirs) == ours
            failed |= not ok
            lines.append(where + f"| {label} | {ours} | {theirs if theirs is None else int(theirs)} | "
                         f"{'equal' if ok else 'DIFFERENT'} |")
        for op in ("ld", "st"):
            wavefronts = sums.get(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
            conflicts = sums.get(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum")
            if wavefronts is None or conflicts is None:
                continue
            ideal = row[f"emulator__wavefronts_ideal_shared_op_{op}"]
            ok = int(wavefronts - conflicts) == ideal
            failed |= not ok
            lines.append(where + f"| shared {op} ideal wavefronts | {ideal} | {int(wavefronts - conflicts)} | "
                         f"{'equal' if ok else 'DIFFERENT'} |")
            ours = row[f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"]
            lines.append(where + f"| shared {op} bank conflicts | {ours} | {int(conflicts)} | "
                         f"difference {int(conflicts) - ours} (reported) |")
    return lines, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("emulator_jsonl")
    parser.add_argument("ncu_dir")
    parser.add_argument("--out", help="also write the table here (markdown)")
    args = parser.parse_args()
    try:
        with open(args.emulator_jsonl) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as error:
        sys.exit(f"compare_counters.py: cannot read {args.emulator_jsonl}: {error}")
    if not os.path.isdir(args.ncu_dir):
        sys.exit(f"compare_counters.py: no folder {args.ncu_dir}")
    lines, failed = compare(rows, args.ncu_dir)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
