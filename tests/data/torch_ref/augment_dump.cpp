// augment_dump: writes what our CIFAR-10 data path hands a model, for
// augment_vs_torchvision.py to rebuild with torchvision's transforms.
//   augment_dump DATA_DIR OUT.safetensors SEED EPOCH IMAGE_SIZE
// OUT holds "x" [n, 3, S, S] (every training sample, in index order, crop-flip
// augmentation for EPOCH) and "decisions" [n, 3] = (dy, dx, flip) as I64.
#include <cstdio>
#include <numeric>
#include <string>

#include "data/images/cifar10.h"
#include "models/io/safetensors.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: augment_dump DATA_DIR OUT SEED EPOCH IMAGE_SIZE\n");
    return 2;
  }
  try {
    dpt::ImageOptions opt;
    opt.augment = dpt::Augment::crop_flip;
    opt.seed = std::stoull(argv[3]);
    opt.pad_to = std::stoll(argv[5]);
    const uint64_t epoch = std::stoull(argv[4]);
    const dpt::Cifar10 ds(argv[1], dpt::Split::train, opt);
    std::vector<size_t> idx(ds.size());
    std::iota(idx.begin(), idx.end(), 0);
    dpt::Batch b;
    ds.fill_for_epoch(idx, epoch, b);
    std::vector<float> decisions;
    for (size_t i : idx) {
      const dpt::CropFlip c = dpt::crop_flip_for(opt.seed, epoch, i, opt.crop_padding);
      decisions.insert(decisions.end(), {float(c.dy), float(c.dx), float(c.flip)});
    }
    const int64_t n = int64_t(idx.size()), s = ds.output_size();
    dpt::save_safetensors(argv[2], {{"x", {n, 3, s, s}, b.x},
                                    {"decisions", {n, 3}, decisions, dpt::FileDType::I64}});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "augment_dump: %s\n", e.what());
    return 1;
  }
}
