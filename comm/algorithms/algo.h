#pragma once
// Algo: the collective algorithm a caller asks for (--algo, COMM_ALGO, CommOptions::algo).
//   auto    - the selector decides (comm/algorithms/selector.h).
//   native  - the backend's own collective (Open MPI's, NCCL's, the tcp arena's).
//   a name  - every registered algorithm of that name (comm/algorithms/registry.cpp):
//             "ring" is ring allreduce, ring reduce-scatter and ring allgather; for a
//             collective with no algorithm of that name, `auto` decides.
// An Algo holds a name with static storage (a registered name, or auto/native), so it
// is a small value compared by name. parse_algo is the way from text.
#include <string>
#include <string_view>

namespace dpt {

namespace algo {
struct Algorithm;
// What --algo and COMM_ALGO take, for every program's help text: auto, native, and
// each registered name with the collectives it runs, e.g.
// "auto | native | ... | ring (allreduce, reduce_scatter, allgather) | ...".
std::string help_text();
}  // namespace algo

class Algo {
 public:
  constexpr Algo() = default;  // auto
  // auto, native, and the names registered today that code refers to by constant; any
  // registered name is reachable through parse_algo.
  static const Algo automatic, native, ring, tree, recursive_doubling;
  // The name under which `algorithm` is registered.
  static Algo of(const algo::Algorithm& algorithm);

  constexpr std::string_view name() const { return name_; }
  constexpr bool operator==(const Algo& o) const { return name_ == o.name_; }

 private:
  constexpr explicit Algo(std::string_view name) : name_(name) {}
  friend Algo parse_algo(std::string_view text);
  std::string_view name_ = "auto";
};

inline constexpr Algo Algo::automatic{"auto"};
inline constexpr Algo Algo::native{"native"};
inline constexpr Algo Algo::ring{"ring"};
inline constexpr Algo Algo::tree{"tree"};
inline constexpr Algo Algo::recursive_doubling{"recursive_doubling"};

// "auto", "native" or a registered name; std::invalid_argument listing the valid ones.
Algo parse_algo(std::string_view text);
// The name, as parse_algo takes it ("auto", "ring", ...).
const char* algo_name(Algo a);

}  // namespace dpt
