// The per-GPU path table (paths.h): parsed once per file, looked up at the nearest grid cell; and what both tuning
// tables share (their location, their text).
#include "paths.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "overrides.h"

namespace hsma {

namespace {
std::atomic<GpuIdentitySource> g_identity_source{nullptr};
std::atomic<CaptureSource> g_capture_source{nullptr};
}  // namespace

void set_gpu_identity_source(GpuIdentitySource source) { g_identity_source.store(source); }

std::optional<GpuIdentity> gpu_identity(int device) {
  const GpuIdentitySource source = g_identity_source.load();
  if (source == nullptr) return std::nullopt;
  return source(device);
}

void set_capture_source(CaptureSource source) { g_capture_source.store(source); }

bool stream_capturing(int device) {
  const CaptureSource source = g_capture_source.load();
  return source != nullptr && source(device);
}

const char* path_name(LargePath p) {
  return p == LargePath::kSweep ? "sweep" : (p == LargePath::kAten ? "aten" : "blocked");
}

namespace {

struct Cell {
  int64_t k, cols, batch;
  double lk, lc, lb;  // their logs
  LargePath path, gpu_path;  // eager; while a CUDA graph is captured
  std::string times;         // "name value, ..." of the measured columns
};

struct PathTable : TableMeta {  // error empty when loaded
  std::map<std::string, std::vector<Cell>> by_dtype;
};

std::mutex g_mutex;
std::map<std::string, PathTable> g_tables;
std::set<std::string> g_warned;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(trim_space(item));
  return out;
}

bool parse_positive(const std::string& s, int64_t* out) {
  char* end = nullptr;
  *out = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && end && *end == '\0' && *out > 0;
}

bool parse_path(const std::string& s, LargePath* out) {
  for (LargePath p : {LargePath::kBlocked, LargePath::kSweep, LargePath::kAten})
    if (s == path_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

const char* kHeader = "dtype,k,cols,batch,path";

PathTable parse(const std::string& path) {
  PathTable t;
  const TableText text = read_table_text(path);
  static_cast<TableMeta&>(t) = text;
  if (!t.error.empty()) return t;
  std::vector<std::string> columns;
  size_t gpu_col = 0;  // the gpu_path column's index (0: none)
  for (const auto& [lineno, line] : text.lines) {
    const std::vector<std::string> f = split(line);
    if (columns.empty()) {
      if (line.rfind(kHeader, 0) != 0) {
        t.error = path + ":" + std::to_string(lineno) + ": expected a header starting '" + kHeader + "'";
        return t;
      }
      columns = f;
      gpu_col = static_cast<size_t>(std::find(columns.begin(), columns.end(), "gpu_path") - columns.begin());
      if (gpu_col == columns.size()) gpu_col = 0;
      continue;
    }
    Cell c{};
    const bool dtype_ok = f.size() >= 5 && (f[0] == "float32" || f[0] == "float64" || f[0] == "complex64" ||
                                            f[0] == "complex128");
    if (!dtype_ok || f.size() > columns.size() || !parse_positive(f[1], &c.k) || !parse_positive(f[2], &c.cols) ||
        !parse_positive(f[3], &c.batch) || !parse_path(f[4], &c.path)) {
      t.error = path + ":" + std::to_string(lineno) + ": malformed row '" + line + "'";
      return t;
    }
    c.gpu_path = c.path;
    if (gpu_col > 0 && gpu_col < f.size() && !f[gpu_col].empty() && !parse_path(f[gpu_col], &c.gpu_path)) {
      t.error = path + ":" + std::to_string(lineno) + ": malformed gpu_path in '" + line + "'";
      return t;
    }
    c.lk = std::log(double(c.k));
    c.lc = std::log(double(c.cols));
    c.lb = std::log(double(c.batch));
    for (size_t i = 5; i < f.size(); ++i)
      if (i != gpu_col && !f[i].empty()) c.times += (c.times.empty() ? "" : ", ") + columns[i] + " " + f[i];
    t.by_dtype[f[0]].push_back(std::move(c));
  }
  if (columns.empty()) t.error = path + ": no '" + std::string(kHeader) + "' header";
  return t;
}

std::mutex g_dir_mutex;
std::string g_table_dir;  // set by the Python package at import

std::string gpu_slug(const std::string& name) {
  std::string s;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) s += static_cast<char>(std::tolower(u));
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

void set_tuning_dir(c10::string_view dir) {
  std::lock_guard<std::mutex> lock(g_dir_mutex);
  g_table_dir = std::string(dir);
}

double log_of(int64_t v) { return std::log(double(std::max<int64_t>(v, 1))); }

}  // namespace

std::string trim_space(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

const char* table_dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    default: return "?";
  }
}

bool measured_on(const std::string& gpu, const std::string& capability, const GpuIdentity& id) {
  return gpu == id.name && (capability.empty() || id.capability.empty() || capability == id.capability);
}

std::string tuning_file_for(const GpuIdentity& gpu, const std::string& suffix) {
  std::lock_guard<std::mutex> lock(g_dir_mutex);
  if (g_table_dir.empty()) return "";
  std::string cc;
  for (char c : gpu.capability)
    if (c != '.') cc += c;
  return g_table_dir + "/" + gpu_slug(gpu.name) + "-sm" + cc + suffix;
}

TableText read_table_text(const std::string& path) {
  TableText t;
  std::ifstream in(path);
  if (!in) {
    t.error = "cannot open " + path;
    return t;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = trim_space(line);
    if (line.empty()) continue;
    if (line[0] != '#') {
      t.lines.emplace_back(lineno, line);
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim_space(line.substr(1, colon - 1)), value = trim_space(line.substr(colon + 1));
    if (key == "gpu") t.gpu = value;
    if (key == "capability") t.capability = value;
  }
  if (t.gpu.empty()) t.error = path + ": no '# gpu:' line";
  return t;
}

PathChoice lookup_path(const GpuIdentity& gpu, const PathCell& cell, bool explain, const std::string& table) {
  PathChoice choice;
  const std::string path = table.empty() ? paths_table_for(gpu) : table;
  if (path.empty()) {
    choice.reason = "no path table (package directory unknown)";
    return choice;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_tables.find(path);
  if (it == g_tables.end()) it = g_tables.emplace(path, parse(path)).first;
  const PathTable& t = it->second;
  if (!t.error.empty()) {
    choice.reason = "no usable path table (" + t.error + ")";
    if (table.empty() && g_warned.insert(path).second)
      TORCH_WARN("hsma_trsm: ", choice.reason, "; orders above 64 take the path by rule. Run `python -m ",
                 "benchmarks.tune_paths` to measure one for this GPU.");
    return choice;
  }
  if (!measured_on(t.gpu, t.capability, gpu)) {
    choice.reason = "path table " + path + " was measured on '" + t.gpu + "', not on '" + gpu.name + "'";
    if (table.empty() && g_warned.insert(path + "|" + gpu.name).second)
      TORCH_WARN("hsma_trsm: ", choice.reason, "; orders above 64 take the path by rule.");
    return choice;
  }
  const auto e = t.by_dtype.find(table_dtype_name(cell.dtype));
  if (e == t.by_dtype.end() || e->second.empty()) {
    choice.reason = "path table " + path + " has no " + table_dtype_name(cell.dtype) + " rows";
    return choice;
  }
  // The nearest cell: the smallest sum of the log gaps in k, cols and batch (ties: the first row).
  const double lk = log_of(cell.k), lc = log_of(cell.cols), lb = log_of(cell.batch);
  const Cell* best = nullptr;
  double best_d = 0;
  for (const Cell& c : e->second) {
    const double d = std::fabs(c.lk - lk) + std::fabs(c.lc - lc) + std::fabs(c.lb - lb);
    if (!best || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  choice.found = true;
  choice.path = cell.capturing ? best->gpu_path : best->path;
  if (explain) {
    choice.reason = "path table " + path + ", cell (k " + std::to_string(best->k) + ", cols " +
                    std::to_string(best->cols) + ", batch " + std::to_string(best->batch) + ")";
    if (best->gpu_path != best->path)
      choice.reason += cell.capturing ? std::string(", its path while a CUDA graph is captured (eager: ") +
                                            path_name(best->path) + ")"
                                      : std::string(" (while a CUDA graph is captured: ") +
                                            path_name(best->gpu_path) + ")";
    if (!best->times.empty()) choice.reason += ": " + best->times;
  }
  return choice;
}

std::string paths_table_for(const GpuIdentity& gpu) {
  const std::string env = paths_path_from_env();
  return env.empty() ? tuning_file_for(gpu, "-paths.csv") : env;
}

}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) { m.def("_set_tuning_dir(str dir) -> ()", &hsma::set_tuning_dir); }
