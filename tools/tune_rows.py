"""Helpers the weft-tune family of scripts share (tools/weft-tune, bench/variant-ratios,
bench/sim-error, bench/model-picks, bench/calibrate_sim.py): sizes as weft spells them, and the
fastest weft-bench row per (variant, size).
"""
import csv


def format_bytes(b):
    """As --slices spells sizes (and weft-bench's table): 64K, 2M, 1G or plain bytes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def parse_bytes(text):
    """64K, 2M, 1G or plain bytes, as WEFT_SLICE_BYTES reads them."""
    units = {"K": 10, "M": 20, "G": 30}
    return int(text[:-1]) << units[text[-1].upper()] if text[-1].upper() in units else int(text)


def keep_fastest(best, variant, rows):
    """Folds weft-bench CSV rows (dicts) of `variant` into best = {variant: {bytes: row}},
    keeping the fastest row per size."""
    for r in rows:
        b = int(r["bytes"])
        kept = best.setdefault(variant, {}).get(b)
        if kept is None or float(r["time_us"]) < float(kept["time_us"]):
            best[variant][b] = r


def fastest_rows(path, keep=lambda row: True):
    """{variant: {bytes: row}} from a weft-bench or weft-tune CSV file: the fastest of the rows
    `keep` accepts, per variant and size."""
    best = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if keep(r):
                keep_fastest(best, r["variant"], [r])
    return best


def forced_times(best, size):
    """{variant: best time} at `size` over the forced variants (every one but "tuner")."""
    return {v: float(rows[size]["time_us"]) for v, rows in best.items() if v != "tuner" and size in rows}
