// Host driver for tests/test_small_selection.py: reads one small-path problem per line from stdin,
//   dtype m n batch a_shared l_row_major multiprocessors cc_major hip sm90_code [l16] [knob=value ...]
// (dtype 0-3: float32, float64, complex64, complex128; l16: L stored in 16 bits; the knobs by their override
// keys, knobs.h), and prints the plan choose_small_kernel returns for it, or "error: <item>" for a knob it does
// not accept, one line each.
// Built with g++ -std=c++17 against csrc/kernels/small/select.h alone.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "select.h"

namespace {

std::string describe(const hsma::SmallPlan& plan) {
  using hsma::SmallFamily;
  char buf[128];
  switch (plan.family) {
#ifdef HSMA_TRSM_ABLATION
    case SmallFamily::kPipeline:
      return "pipeline";
#endif
    case SmallFamily::kMma:
      std::snprintf(buf, sizeof buf, "mma M=%d warps=%d %s", plan.rows, plan.warps, plan.fold ? "fold" : "substitute");
      return buf;
    case SmallFamily::kTiles:
      std::snprintf(buf, sizeof buf, "tiles threads=%d steps=%d", plan.threads, plan.steps);
      return buf;
    case SmallFamily::kWarpTasks:
      std::snprintf(buf, sizeof buf, "warp_tasks M=%d", plan.rows);
      return buf;
    case SmallFamily::kColumns:
      std::snprintf(buf, sizeof buf, "columns M=%d H=%d %s %s", plan.rows, plan.column_rows,
                    plan.row_major ? "row" : "col", plan.packed ? "packed" : "unpacked");
      return buf;
    case SmallFamily::kSegments:
      if (plan.blocked)
        std::snprintf(buf, sizeof buf, "segments M=%d blocked lanes=%d steps=%d", plan.rows, plan.lanes, plan.steps);
      else if (plan.lanes == hsma::kNarrowSegment)
        std::snprintf(buf, sizeof buf, "segments M=%d narrow cols=%d", plan.rows, plan.columns);
      else
        std::snprintf(buf, sizeof buf, "segments M=%d strided", plan.rows);
      return buf;
  }
  return "unknown";
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    long long dtype, m, n, batch, a_shared, l_row_major, sms, cc, hip, sm90;
    if (!(in >> dtype >> m >> n >> batch >> a_shared >> l_row_major >> sms >> cc >> hip >> sm90)) break;
    hsma::SmallShape s;
    s.dtype = static_cast<hsma::SmallDtype>(dtype);
    s.m = m;
    s.n = n;
    s.batch = batch;
    s.a_shared = a_shared != 0;
    s.l_row_major = l_row_major != 0;
    // The knobs, as key=value of the override spec (knobs.h parses them, as csrc/overrides.cpp does).
    hsma::SmallKnobs knobs;
    std::string item, error;
    while (in >> item) {
      if (item == "l16") {
        s.l_16bit = true;
        continue;
      }
      const size_t eq = item.find('=');
      bool known = false;
      if (eq == std::string::npos || !hsma::set_small_knob(knobs, item.substr(0, eq), item.substr(eq + 1), &known))
        error = "error: " + item;
    }
    hsma::copy_small_knobs(s, knobs);
    hsma::SmallDevice d;
    d.multiprocessors = static_cast<int>(sms);
    d.cc_major = static_cast<int>(cc);
    d.hip = hip != 0;
    d.sm90_code = sm90 != 0;
    std::cout << (error.empty() ? describe(hsma::choose_small_kernel(s, d)) : error) << "\n";
  }
  return 0;
}
