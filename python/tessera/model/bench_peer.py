"""The tiny model in tessera against the same model in eager PyTorch: ``python -m tessera.model.bench_peer``
(run by ``tessera bench model``).

Both run greedy generation of the same prompts from the same random checkpoint (configs/tiny.json) in
this process with the same thread count, alternating run by run so a shared machine slows both alike;
medians of the runs. In each run each model generates twice back to back and only the second call is
timed, so that neither is timed while the other's worker threads still spin-wait for more work or its
own threads wake from sleep (docs/notes/2026-12-07-model-first-touch.md). Prints
``generate_tiny <prompts> <prompt_len> <new_tokens> <tessera_ms> <torch_ms>``; without torch prints
``skip: torch is not installed`` and exits 0.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera.model.bench_peer")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skip: torch is not installed", flush=True)
        return 0
    import numpy as np

    import tessera
    from tessera.model import Model
    from tessera.model.config import load_config
    from tessera.model.random_checkpoint import write_random_checkpoint
    from tessera.model.torch_eager import TorchEagerModel

    torch.set_num_threads(tessera.num_threads())
    config = load_config(os.path.join(os.path.dirname(__file__), "configs", "tiny.json"))
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(0, config["vocab_size"], args.prompt_len)] for _ in range(args.prompts)]
    with tempfile.TemporaryDirectory(prefix="tessera-bench-peer-") as path:
        write_random_checkpoint(config, path, seed=0, progress=False)
        ours = Model(path, max_batch_size=args.prompts)
        peer = TorchEagerModel(path, max_batch_size=args.prompts)
        ours_ms, peer_ms = [], []
        for run in range(args.runs + 1):  # run 0 warms both up
            ours.generate(prompts, args.new_tokens)
            t = time.perf_counter()
            ours_tokens = ours.generate(prompts, args.new_tokens)
            a = (time.perf_counter() - t) * 1e3
            peer.generate(prompts, args.new_tokens)
            t = time.perf_counter()
            peer_tokens = peer.generate(prompts, args.new_tokens)
            b = (time.perf_counter() - t) * 1e3
            if run:
                ours_ms.append(a)
                peer_ms.append(b)
        same = sum(x == y for p, q in zip(ours_tokens, peer_tokens) for x, y in zip(p, q))
        print(f"bench_peer: {same} of {args.prompts * args.new_tokens} greedy tokens equal between the two "
              "(their numerics differ: the peer's linears take bf16 activations, not FP8, and its caches are bf16)",
              file=sys.stderr, flush=True)
    print(f"generate_tiny {args.prompts} {args.prompt_len} {args.new_tokens} {statistics.median(ours_ms):.3f} "
          f"{statistics.median(peer_ms):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
