"""One rank of tessera.model's expert parallelism, started by tests/python/test_model_ep.py: with
``parallel`` under mpirun (ep_group = tessera.deep_ep.Group.world()), else one plain process without MPI.
Rank r runs prompts r, r+R, ...: a prefill and 3 greedy decode steps with batch_invariant, saving each
of its sequences' logits and hidden states of every step to OUT/seq<i>.npz; prints one OK line."""
import os
import sys

import numpy as np

from tessera.model import Model

PROMPTS = [[5, 17, 3, 99, 42, 7, 61, 2, 88, 14, 30, 9, 71, 23, 50, 11, 64, 8, 36], [12, 4, 77],
           [90, 31, 6, 45, 19, 83, 27]]
DECODE_STEPS = 3


def main(path, out_dir, parallel):
    group = None
    if parallel:
        import tessera.deep_ep as deep_ep
        group = deep_ep.Group.world()
    ranks, me = (group.size(), group.rank()) if group else (1, 0)
    mine = list(range(me, len(PROMPTS), ranks))
    most = max(sum(len(PROMPTS[i]) for i in range(r, len(PROMPTS), ranks)) for r in range(ranks))
    m = Model(path, max_batch_size=max(1, len(mine)), max_seq_len=64, ep_group=group, ep_max_tokens=max(1, most),
              batch_invariant=True)
    slots = list(range(len(mine)))
    prompts = [PROMPTS[i] for i in mine]
    logits, hidden = m.prefill(slots, prompts, return_hidden=True)
    last = np.cumsum([len(p) for p in prompts], dtype=np.int64) - 1
    saved = {i: {"logits": [logits[j]], "hidden": [hidden[:, last[j]]]} for j, i in enumerate(mine)}
    for _ in range(DECODE_STEPS):
        next_tokens = [int(t) for t in np.argmax(logits, axis=1)] if len(mine) else []
        logits, hidden = m.decode(slots, next_tokens, return_hidden=True)
        for j, i in enumerate(mine):
            saved[i]["logits"].append(logits[j])
            saved[i]["hidden"].append(hidden[:, j])
    os.makedirs(out_dir, exist_ok=True)
    for i, arrays in saved.items():
        np.savez(os.path.join(out_dir, f"seq{i}.npz"), logits=np.stack(arrays["logits"]),
                 hidden=np.stack(arrays["hidden"]))
    print(f"MODEL_EP_WORKER OK rank {me} of {ranks}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == "parallel")
