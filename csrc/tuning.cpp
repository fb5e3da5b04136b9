// Adaptive block size for the blocked path (the HSMA-TRSM paper's offline profiling + online
// lookup). Offline, `python -m benchmarks.tune` measures every candidate (NB, variant) per
// (dtype, size) on one GPU and writes the fastest as a table; online, this file finds the table
// for the current GPU and returns the entry of the nearest measured size (in log scale).
//
// Table format (CSV, '#' lines are metadata or comments):
//   # gpu: NVIDIA H200
//   # capability: 9.0
//   dtype,size,nb,variant
//   float32,1024,256,recursive
// Resolution: HSMA_TRSM_TABLE=path if set, else <package>/tuning/<gpu-slug>-sm<cc>.csv.
// A missing, malformed or foreign-GPU table gives one warning and the default.
// The overrides nb and variant replace the table's choice (csrc/overrides.h).
#include <torch/library.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "overrides.h"
#include "trsm.h"

namespace hsma {
namespace {

constexpr int64_t kDefaultNB = 128;

struct Entry {
  int64_t size, nb;
  BlockedVariant variant;
};

struct Table {
  std::string error;  // empty when loaded
  std::string gpu, capability;
  std::map<std::string, std::vector<Entry>> by_dtype;
};

std::mutex g_mutex;
std::string g_table_dir;                 // set by the Python package at import
std::map<std::string, Table> g_tables;   // parsed tables by path
std::set<std::string> g_warned;

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool parse_variant(const std::string& v, BlockedVariant* out) {
  if (v == "recursive") { *out = BlockedVariant::kRecursive; return true; }
  if (v == "blocked") { *out = BlockedVariant::kBlocked; return true; }
  return false;
}

Table parse_table(const std::string& path) {
  Table t;
  std::ifstream in(path);
  if (!in) {
    t.error = "cannot open " + path;
    return t;
  }
  std::string line;
  int lineno = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    line = trim(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const std::string key = trim(line.substr(1, colon - 1)), value = trim(line.substr(colon + 1));
        if (key == "gpu") t.gpu = value;
        if (key == "capability") t.capability = value;
      }
      continue;
    }
    if (!header) {
      if (line != "dtype,size,nb,variant") {
        t.error = path + ":" + std::to_string(lineno) + ": expected the header 'dtype,size,nb,variant'";
        return t;
      }
      header = true;
      continue;
    }
    std::stringstream ss(line);
    std::string dtype, size, nb, variant;
    std::getline(ss, dtype, ',');
    std::getline(ss, size, ',');
    std::getline(ss, nb, ',');
    std::getline(ss, variant, ',');
    Entry e{};
    char* end = nullptr;
    e.size = std::strtoll(size.c_str(), &end, 10);
    const bool size_ok = end && *end == '\0' && e.size > 0;
    e.nb = std::strtoll(nb.c_str(), &end, 10);
    const bool nb_ok = end && *end == '\0' && e.nb >= 1 && e.nb <= kDiagInverseMaxNBHost;
    const bool dtype_ok = dtype == "float32" || dtype == "float64" || dtype == "complex64" || dtype == "complex128";
    if (!size_ok || !nb_ok || !dtype_ok || !parse_variant(trim(variant), &e.variant)) {
      t.error = path + ":" + std::to_string(lineno) + ": malformed row '" + line + "'";
      return t;
    }
    t.by_dtype[dtype].push_back(e);
  }
  if (!header) t.error = path + ": no 'dtype,size,nb,variant' header";
  if (t.error.empty() && t.gpu.empty()) t.error = path + ": no '# gpu:' line";
  return t;
}

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return "?";
  }
}

void warn_once(const std::string& key, const std::string& msg) {
  if (g_warned.insert(key).second) TORCH_WARN("hsma_trsm: ", msg);
}

}  // namespace

std::string gpu_slug(const std::string& name) {
  std::string s;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

std::string table_path_for(const std::string& gpu, const std::string& capability) {
  const std::string env = table_path_from_env();
  if (!env.empty()) return env;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_table_dir.empty()) return "";
  std::string cc;
  for (char c : capability)
    if (c != '.') cc += c;
  return g_table_dir + "/" + gpu_slug(gpu) + "-sm" + cc + ".csv";
}

BlockChoice lookup_blocking(const std::string& path, const std::string& gpu, const std::string& capability,
                            at::ScalarType dtype, int64_t k) {
  BlockChoice choice{kDefaultNB, BlockedVariant::kRecursive, "default"};
  if (!path.empty()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_tables.find(path);
    if (it == g_tables.end()) it = g_tables.emplace(path, parse_table(path)).first;
    const Table& t = it->second;
    if (!t.error.empty()) {
      // A missing shipped table is normal on an untuned GPU; say so once, quietly different.
      warn_once(path, "no usable block-size table (" + t.error + "); using NB = " + std::to_string(kDefaultNB) +
                          ". Run `python -m benchmarks.tune` to measure one for this GPU.");
    } else if (t.gpu != gpu || (!t.capability.empty() && !capability.empty() && t.capability != capability)) {
      warn_once(path + "|" + gpu, "block-size table " + path + " was measured on '" + t.gpu + "' (capability " +
                                      t.capability + "), not on this '" + gpu + "' (capability " + capability +
                                      "); using NB = " + std::to_string(kDefaultNB));
    } else {
      auto e = t.by_dtype.find(dtype_name(dtype));
      if (e != t.by_dtype.end() && !e->second.empty()) {
        const Entry* best = nullptr;
        double best_d = 0;
        for (const Entry& x : e->second) {
          const double d = std::fabs(std::log(double(x.size)) - std::log(double(k > 0 ? k : 1)));
          if (!best || d < best_d) { best = &x; best_d = d; }
        }
        choice = {best->nb, best->variant, "table " + path + " (size " + std::to_string(best->size) + ")"};
      }
    }
  }
  const Overrides& o = overrides();
  if (o.nb > 0) {
    choice.nb = o.nb;
    choice.forced = true;
    choice.source = "override nb";
  }
  if (o.variant >= 0) {
    choice.variant = static_cast<BlockedVariant>(o.variant);
    choice.source += ", override variant";
  }
  return choice;
}

const char* variant_name(BlockedVariant v) { return v == BlockedVariant::kRecursive ? "recursive" : "blocked"; }

static void set_tuning_dir(c10::string_view dir) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_table_dir = std::string(dir);
}

static std::tuple<int64_t, std::string, std::string> lookup_op(c10::string_view table, c10::string_view gpu,
                                                               c10::string_view capability, at::ScalarType dtype,
                                                               int64_t k) {
  const std::string path = table.empty() ? table_path_for(std::string(gpu), std::string(capability)) : std::string(table);
  const BlockChoice c = lookup_blocking(path, std::string(gpu), std::string(capability), dtype, k);
  return {c.nb, variant_name(c.variant), c.source};
}

}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) {
  m.def("_set_tuning_dir(str dir) -> ()", &hsma::set_tuning_dir);
  m.def("_lookup_blocking(str table, str gpu, str capability, ScalarType dtype, int k) -> (int, str, str)",
        &hsma::lookup_op);
}
