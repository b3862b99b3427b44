#!/usr/bin/python3
"""Our CIFAR-10 augmentation against torchvision's transforms.

Usage: augment_vs_torchvision.py AUGMENT_DUMP WORK_DIR

Writes a small CIFAR-10 folder in the binary format (its own writer), has augment_dump
produce every training sample for a few (seed, epoch, image size), and checks:
  - the crop/flip decisions equal this file's own implementation of the documented
    rule (data/images/image_transform.h: mix_seed chain, dy = h mod 9, dx = h / 9 mod 9,
    flip = bit 63);
  - the pixels equal torchvision's pipeline on the same bytes with those decisions:
    Pad(centring, for a larger image size) -> pad 4 and crop (dy, dx) as RandomCrop(S,
    padding=4) does -> hflip -> ToTensor -> Normalize(tutorial's mean and std).
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision.transforms.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import st_io  # noqa: E402

MASK = (1 << 64) - 1
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


def mix_seed(seed, stream):
    z = (seed + 0x9E3779B97F4A7C15 * (stream + 1)) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def decision(seed, epoch, index, p=4):
    h = mix_seed(mix_seed(mix_seed(seed, epoch), index), 0)
    return h % (2 * p + 1), (h // (2 * p + 1)) % (2 * p + 1), h >> 63


def write_cifar(folder, rng, per_file=4):
    os.makedirs(folder, exist_ok=True)
    images = []
    for i in range(1, 6):
        recs = []
        for _ in range(per_file):
            img = rng.integers(0, 256, (3, 32, 32), dtype=np.uint8)
            images.append(img)
            recs.append(bytes([int(rng.integers(0, 10))]) + img.tobytes())
        with open(os.path.join(folder, f"data_batch_{i}.bin"), "wb") as f:
            f.write(b"".join(recs))
    with open(os.path.join(folder, "test_batch.bin"), "wb") as f:
        f.write(bytes([0]) + images[0].tobytes())
    return images


def torchvision_sample(img, size, dy, dx, flip):
    t = torch.from_numpy(img.transpose(1, 2, 0).copy()).permute(2, 0, 1)  # uint8 CHW
    if size > 32:
        t = F.pad(t, [(size - 32) // 2] * 4, fill=0)
    t = F.pad(t, [4, 4, 4, 4], fill=0)       # RandomCrop(size, padding=4): pad, then
    t = F.crop(t, dy, dx, size, size)        # the window at get_params' (i, j)
    if flip:
        t = F.hflip(t)
    t = t.float() / 255.0                    # ToTensor on uint8
    return F.normalize(t, MEAN, STD).numpy()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tool, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(5)
    folder = os.path.join(work, "cifar")
    images = write_cifar(folder, rng)
    failures = 0
    for seed, epoch, size in [(0, 0, 32), (7, 3, 32), (123456789, 11, 36)]:
        out = os.path.join(work, f"aug_{seed}_{epoch}_{size}.safetensors")
        subprocess.run([tool, folder, out, str(seed), str(epoch), str(size)], check=True)
        got, _ = st_io.read(out)
        worst, flips, wrong_decisions = 0.0, 0, 0
        for i, img in enumerate(images):
            dy, dx, flip = decision(seed, epoch, i)
            wrong_decisions += tuple(int(v) for v in got["decisions"][i]) != (dy, dx, flip)
            flips += flip
            ref = torchvision_sample(img, size, dy, dx, flip)
            worst = max(worst, float(np.abs(got["x"][i] - ref).max()))
        ok = wrong_decisions == 0 and worst <= 1e-6
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} seed {seed} epoch {epoch} size {size}: {len(images)} samples, "
              f"{flips} flipped, decisions differing {wrong_decisions}, max |ours - torchvision| {worst:.1e}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
