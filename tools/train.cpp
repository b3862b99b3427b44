// train: data-parallel training, one process per rank.
//   build/bin/launch -n 2 build/bin/train                    (tcp, Fashion-MNIST MLP)
//   mpirun -np 4 build/bin/train --model mlp --backend mpi
// Rank 0 prints a boxed configuration, one line per logged step, and a final line
// `final: key=value ...`. See --help for every flag. The whole program is the public
// API's dpt::train_main (dpt/trainer.h) with the built-in models and data: a program of
// yours gets the same with your model and data (docs/library.md).
#include <dpt/trainer.h>

int main(int argc, char** argv) { return dpt::train_main(argc, argv); }
