// Host driver for tests/test_small_selection.py: reads one small-path problem per line from stdin,
//   dtype m n batch a_shared l_row_major kernel segment_lanes segment_rows segment_steps column_rows
//   mma_warps mma_fold multiprocessors cc_major hip sm90_code
// (dtype 0-3: float32, float64, complex64, complex128; kernel: SmallKernel's value), and prints the
// plan choose_small_kernel returns for it, one line each. Built with g++ -std=c++17 against
// csrc/kernels/small/select.h alone.
#include <cstdio>
#include <iostream>
#include <string>

#include "select.h"

namespace {

std::string describe(const hsma::SmallPlan& plan) {
  using hsma::SmallFamily;
  char buf[128];
  switch (plan.family) {
    case SmallFamily::kPipeline:
      return "pipeline";
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
  long long dtype, m, n, batch, a_shared, l_row_major, kernel, lanes, rows, steps, column_rows, mma_warps, mma_fold,
      sms, cc, hip, sm90;
  while (std::cin >> dtype >> m >> n >> batch >> a_shared >> l_row_major >> kernel >> lanes >> rows >> steps >>
         column_rows >> mma_warps >> mma_fold >> sms >> cc >> hip >> sm90) {
    hsma::SmallShape s;
    s.dtype = static_cast<hsma::SmallDtype>(dtype);
    s.m = m;
    s.n = n;
    s.batch = batch;
    s.a_shared = a_shared != 0;
    s.l_row_major = l_row_major != 0;
    s.kernel = static_cast<hsma::SmallKernel>(kernel);
    s.segment_lanes = static_cast<int>(lanes);
    s.segment_rows = static_cast<int>(rows);
    s.segment_steps = static_cast<int>(steps);
    s.column_rows = static_cast<int>(column_rows);
    s.mma_warps = static_cast<int>(mma_warps);
    s.mma_fold = static_cast<int>(mma_fold);
    hsma::SmallDevice d;
    d.multiprocessors = static_cast<int>(sms);
    d.cc_major = static_cast<int>(cc);
    d.hip = hip != 0;
    d.sm90_code = sm90 != 0;
    std::cout << describe(hsma::choose_small_kernel(s, d)) << "\n";
  }
  return 0;
}
