#!/usr/bin/env python3
"""Side by side with llama.cpp on the same checkpoint: medians of interleaved pairs.

Converts a `dsv4 make-checkpoint` checkpoint to GGUF with the peer's converter (outside this
project), then alternates the two engines — each run preceded by dropping the other engine's
files from the page cache and reading its own (both do not fit in RAM together on a 24 GB
machine), the first of each pair alternating — and prints, per figure, both engines' medians, the median of the
per-pair ratios, acceptance (speculative figures) and peak RSS.

Figures (names for --figures):
  decode        plain decode of 64 tokens after a short prompt
  ctxN          decode of 32 tokens after N tokens of context (e.g. ctx4096, ctx16384)
  prefillN      prefill of N tokens (e.g. prefill512, prefill4096)
  specK         MTP speculative decoding, K drafts, on --spec-model (e.g. spec1, spec2, spec3);
                both engines read the same prompt (ASCII text, given to ours as the peer's byte ids)

Ours: `dsv4 generate ... --json`. The peer: `llama-bench -o json` (plain figures) and
`llama-speculative-simple --spec-type draft-mtp` (speculative figures). Needs Python 3 and,
for the converter, numpy (Debian: python3-numpy).

usage: peer_compare.py --dsv4 build/dsv4 --llama-bin LLAMA/build/bin --converter convert_v4_gguf.py
                       --gguf-py LLAMA/gguf-py --model CKPT [--spec-model CKPT] --work DIR
                       [--pairs 5] [--threads 2] [--figures decode,prefill512,...] [--json OUT]
                       [--dsv4-args '--draft-head int4']
"""
import argparse
import glob
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def warm(paths, others):
    """Drops the other engine's files from the page cache, then reads these twice, so that the
    run that follows finds all of them cached (read once, pages would sit on the kernel's
    inactive list and could be evicted before the other engine's recently used pages)."""
    for p in others:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    for _ in range(2):
        for p in paths:
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass


def timed(cmd, stdin=None, timeout=7200):
    """Runs cmd under /usr/bin/time; returns (returncode, stdout, stderr, peak RSS in MB)."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss:
        full = ["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd
        # errors="replace": the peer prints its byte tokens as they come, not always UTF-8
        p = subprocess.run(full, input=stdin, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
        try:
            peak = float(open(rss.name).read().strip().splitlines()[-1]) / 1024.0
        except (ValueError, IndexError):
            peak = float("nan")
    return p.returncode, p.stdout, p.stderr, peak


def config_of(model):
    with open(os.path.join(model, "config.json")) as f:
        return json.load(f)


def token_file(work, n, vocab, seed):
    path = os.path.join(work, f"prompt_{n}_{seed}.txt")
    if not os.path.exists(path):
        rng = random.Random(seed)
        with open(path, "w") as f:
            f.write("0\n" + "".join(f"{rng.randrange(2, vocab)}\n" for _ in range(n - 1)))
    return path


def text_token_file(work, text):
    """The peer's tokens for `text`: its converted vocabulary is bytes (ids 0..255) with no merges
    that ASCII letters reach and no BOS, so both engines read the same prompt."""
    path = os.path.join(work, f"prompt_text_{len(text)}_{zlib.crc32(text.encode()):08x}.txt")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("".join(f"{b}\n" for b in text.encode("ascii")))
    return path


def convert(args, model, out_dir):
    """GGUF of the target and of the MTP module (cached by checkpoint path)."""
    os.makedirs(out_dir, exist_ok=True)
    target, mtp = os.path.join(out_dir, "model.gguf"), os.path.join(out_dir, "mtp.gguf")
    env = dict(os.environ, PYTHONPATH=args.gguf_py)
    for out, extra in ((target, []), (mtp, ["--mtp"])):
        if os.path.exists(out):
            continue
        log(f"converting {model} -> {out}")
        cmd = [args.python, args.converter, model, "--outfile", out + ".tmp", "--gguf-py", args.gguf_py] + extra
        subprocess.run(cmd, check=True, env=env)
        os.rename(out + ".tmp", out)
    return target, mtp


class Runner:
    def __init__(self, args):
        self.a = args
        self.t = str(args.threads)

    # --- ours -------------------------------------------------------------------------------
    def ours(self, model, prompt_file, new_tokens, draft=0):
        cmd = [self.a.dsv4, "generate", "--model", model, "--prompt-tokens-file", prompt_file,
               "--max-new-tokens", str(new_tokens), "--ignore-eos", "--threads", self.t, "--json",
               "--draft", str(draft)] + self.a.dsv4_args.split()
        rc, out, err, rss = timed(cmd)
        if rc != 0:
            return {"error": f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}", "rss_mb": rss}
        j = json.loads(out)
        return {"decode": j["decode_tokens_per_s"], "prefill": j["prefill_tokens_per_s"],
                "acceptance": j.get("accepted", 0) / j["drafted"] if j.get("drafted") else None, "rss_mb": rss}

    # --- the peer ---------------------------------------------------------------------------
    def bench(self, gguf, p, n, d=0):
        cmd = [os.path.join(self.a.llama_bin, "llama-bench"), "-m", gguf, "-p", str(p), "-n", str(n), "-t", self.t,
               "-r", "1", "-o", "json"]
        if d:
            cmd += ["-d", str(d)]
        rc, out, err, rss = timed(cmd)
        if rc != 0:
            return {"error": f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}", "rss_mb": rss}
        tests = json.loads(out[out.index("["):])
        ts = tests[-1]["avg_ts"]
        return {"decode" if n else "prefill": ts, "rss_mb": rss}

    def speculative(self, gguf, mtp, k, new_tokens, prompt_text):
        t = self.t
        cmd = [os.path.join(self.a.llama_bin, "llama-speculative-simple"), "-m", gguf, "-md", mtp,
               "--spec-type", "draft-mtp", "--spec-draft-n-max", str(k), "-n", str(new_tokens), "-p", prompt_text,
               "-t", t, "-tb", t, "-td", t, "-tbd", t, "--temp", "0", "--top-k", "1", "--ignore-eos"]
        rc, out, err, rss = timed(cmd)
        text = out + err
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", text)
        if rc != 0 or not m:
            tail = text.strip().splitlines()[-1] if text.strip() else ""
            return {"error": f"exit {rc}: {tail}", "rss_mb": rss}
        acc = re.search(r"accept\s+=\s+([\d.]+)%", text)
        return {"decode": float(m.group(3)), "acceptance": float(acc.group(1)) / 100 if acc else None, "rss_mb": rss}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsv4", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--converter", required=True)
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--python", default="/usr/bin/python3", help="Python with numpy, for the converter")
    ap.add_argument("--model", required=True, help="checkpoint for the plain figures")
    ap.add_argument("--spec-model", help="checkpoint for the speculative figures (default --model)")
    ap.add_argument("--work", required=True, help="scratch directory (GGUF files, prompts)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--figures", default="decode,prefill512,prefill4096,ctx4096,ctx16384,spec1,spec2,spec3")
    ap.add_argument("--json", help="write all runs and summaries here")
    ap.add_argument("--dsv4-args", default="", help="extra arguments of our generate runs (e.g. '--draft-head int4')")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a)
    spec_model = a.spec_model or a.model
    figures = [f for f in a.figures.split(",") if f]
    models = {a.model} | ({spec_model} if any(f.startswith("spec") for f in figures) else set())
    gguf = {m: convert(a, m, os.path.join(a.work, "gguf-" + os.path.basename(os.path.normpath(m)))) for m in models}

    def our_files(m):
        return sorted(glob.glob(os.path.join(m, "*.safetensors")))

    results = {}
    for fig in figures:
        model = spec_model if fig.startswith("spec") else a.model
        cfg = config_of(model)
        vocab, window = cfg["vocab_size"], cfg["sliding_window"]
        target, mtp = gguf[model]
        if fig == "decode":
            ours = lambda: r.ours(model, token_file(a.work, 8, vocab, 1), 64)
            peer = lambda: r.bench(target, 0, 64)
            key = "decode"
        elif fig.startswith("ctx"):
            n = int(fig[3:])
            ours = lambda n=n: r.ours(model, token_file(a.work, n, vocab, 2), 32)
            peer = lambda n=n: r.bench(target, 0, 32, d=n)
            key = "decode"
        elif fig.startswith("prefill"):
            n = int(fig[7:])
            ours = lambda n=n: r.ours(model, token_file(a.work, n, vocab, 3), 1)
            peer = lambda n=n: r.bench(target, n, 0)
            key = "prefill"
        elif fig.startswith("spec"):
            k = int(fig[4:])
            n_prompt = window + 32  # past the first window, as a long generation runs
            rng = random.Random(5)
            text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n_prompt))
            ours = lambda k=k, text=text: r.ours(model, text_token_file(a.work, text), 64, draft=k)
            peer = lambda k=k: r.speculative(target, mtp, k, 64, text)
            key = "decode"
        else:
            sys.exit(f"unknown figure {fig}")
        runs = []
        for i in range(a.pairs):
            pair = {}
            mine, theirs = our_files(model), [target, mtp] if fig.startswith("spec") else [target]
            order = [("ours", ours, mine, theirs), ("peer", peer, theirs, mine)]
            if i % 2:
                order.reverse()
            for name, fn, files, others in order:
                warm(files, others)
                t0 = time.time()
                pair[name] = fn()
                pair[name]["seconds"] = time.time() - t0
                log(f"{fig} pair {i + 1}/{a.pairs} {name}: {pair[name]}")
            runs.append(pair)
        ours_v = [p["ours"].get(key) for p in runs]
        peer_v = [p["peer"].get(key) for p in runs]
        ratios = [o / q for o, q in zip(ours_v, peer_v) if o and q]
        results[fig] = {
            "metric": key + " tokens/s",
            "ours": median(ours_v), "peer": median(peer_v), "ratio": median(ratios), "pairs": len(ratios),
            "ours_acceptance": median([p["ours"].get("acceptance") for p in runs]),
            "peer_acceptance": median([p["peer"].get("acceptance") for p in runs]),
            "ours_rss_mb": max((p["ours"]["rss_mb"] for p in runs), default=None),
            "peer_rss_mb": max((p["peer"]["rss_mb"] for p in runs), default=None),
            "errors": [p[s]["error"] for p in runs for s in ("ours", "peer") if "error" in p[s]],
            "runs": runs,
        }

    fmt = lambda v, f="{:.2f}": "—" if v is None else f.format(v)
    print(f"threads {a.threads}; {a.pairs} interleaved pairs per figure; medians"
          + (f"; ours with {a.dsv4_args}" if a.dsv4_args else ""))
    print(f"{'figure':<12} {'metric':<18} {'ours':>9} {'llama.cpp':>10} {'ratio':>7} {'acc ours':>9} {'acc peer':>9}"
          f" {'RSS ours MB':>12} {'RSS peer MB':>12}")
    for fig, s in results.items():
        print(f"{fig:<12} {s['metric']:<18} {fmt(s['ours']):>9} {fmt(s['peer']):>10} {fmt(s['ratio']):>7}"
              f" {fmt(s['ours_acceptance'], '{:.3f}'):>9} {fmt(s['peer_acceptance'], '{:.3f}'):>9}"
              f" {fmt(s['ours_rss_mb'], '{:.0f}'):>12} {fmt(s['peer_rss_mb'], '{:.0f}'):>12}")
        for e in sorted(set(s["errors"])):
            print(f"    error: {e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
