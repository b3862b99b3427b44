#pragma once
// The timeline (train --trace DIR): every phase of the training thread and every
// collective of every communicator of this process, as Chrome trace events, written to
// DIR/rank<R>.json when the run ends; tools/trace_merge.py merges the ranks' files into
// one trace with a lane pair per rank (Perfetto, chrome://tracing) and computes the
// overlap of communication with compute, idle time and the slowest rank per step.
//
// Terms:
//   phase       the trainer's set_flight_phase (flight_recorder.h): data, forward,
//               backward, sync, update, eval, save, outer (DiLoCo's exchange), other;
//               a phase lasts until the next one is set. Lane "compute" (tid 0).
//   collective  a collective from its start on the communicator's thread to its
//               completion, with kind, bytes, algorithm, step and bucket (the flight
//               recorder's entry; lane "communication", tid 1). Needs the recorder on
//               (DPT_FLIGHT, default 1).
//   clock       microseconds of the wall clock (system_clock): ranks of one host share it
//               exactly, hosts as well as NTP keeps them.
// Off unless timeline_open was called: one relaxed atomic load per phase and collective.
#include <cstdint>
#include <string>

namespace dpt {

// Starts recording this process's events, to be written as DIR/rank<rank>.json.
void timeline_open(const std::string& dir, int rank, int world);
// Writes the file (when open) and stops recording; returns its path ("" when closed).
std::string timeline_close();
bool timeline_on();

// Called by the flight recorder (times in its now_ns()).
void timeline_phase(const char* phase, int64_t step, int64_t t_ns);
void timeline_collective(const char* kind, uint64_t bytes, const char* algorithm, int64_t step, int32_t bucket,
                         int64_t t_start_ns, int64_t t_end_ns, bool ok);

}  // namespace dpt
