// The development overrides (see overrides.h): the spec parser, the current object, the private
// ops torch.ops.hsma._set_overrides / _get_overrides, and the only reads of the environment.
#include "overrides.h"

#include <torch/library.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/limits.h"
#include "paths.h"

namespace hsma {

std::atomic<const Overrides*> g_overrides{&kNoOverrides};

namespace {

// A decimal integer of at most 10 digits (no sign, space or exponent) in [lo, hi].
bool parse_int(const std::string& v, int64_t lo, int64_t hi, int64_t* out) {
  if (v.empty() || v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  const int64_t x = std::stoll(v);
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

template <typename T>
bool one_of(const std::string& v, std::initializer_list<int> values, T* out) {
  int64_t x = 0;
  if (!parse_int(v, 0, 1 << 20, &x)) return false;
  for (int value : values)
    if (x == value) {
      *out = static_cast<T>(x);
      return true;
    }
  return false;
}

bool one_of_names(const std::string& v, std::initializer_list<const char*> names, int* out) {
  int i = 0;
  for (const char* name : names) {
    if (v == name) {
      *out = i;
      return true;
    }
    ++i;
  }
  return false;
}

// One key of the spec: its name, the values it takes (for errors) and the one that means "not
// forced" (left out of the canonical spec; "" for none), and where a value goes.
struct Key {
  std::string name, accepts, unforced;
  std::function<bool(Overrides& o, const std::string& value)> set;  // false: value not accepted
};

// The keys in the canonical spec's order: the small-path knobs (kernels/small/knobs.h), then the rest.
const std::vector<Key>& keys() {
  static const std::vector<Key>* all = [] {
    auto* k = new std::vector<Key>();
#define HSMA_X(field, key, type, dflt, rule)                                                      \
  k->push_back(Key{key, knob_accepts(rule), knob_text(rule, static_cast<int64_t>(type(dflt))),       \
                   [](Overrides& o, const std::string& v) {                                        \
                     bool known = false;                                                           \
                     return set_small_knob(o.small, key, v, &known);                               \
                   }});
    HSMA_SMALL_KNOBS(HSMA_X)
#undef HSMA_X
    const std::vector<Key> rest = {
        {"nb", "an integer in 1..1024", "",
         [](Overrides& o, const std::string& v) { return parse_int(v, 1, kDiagInverseMaxNB, &o.nb); }},
        {"table_nb", "an integer in 1..1024", "",
         [](Overrides& o, const std::string& v) { return parse_int(v, 1, kDiagInverseMaxNB, &o.table_nb); }},
        {"variant", "recursive or blocked", "",
         [](Overrides& o, const std::string& v) { return one_of_names(v, {"recursive", "blocked"}, &o.variant); }},
        {"ib", "a power of two in 1..1024", "",
         [](Overrides& o, const std::string& v) {
           return parse_int(v, 1, kDiagInverseMaxNB, &o.ib) && (o.ib & (o.ib - 1)) == 0;
         }},
        {"aten_gemm", "0 or 1", "0",
         [](Overrides& o, const std::string& v) { return one_of(v, {0, 1}, &o.aten_gemm); }},
        {"path", "blocked, sweep or aten", "",
         [](Overrides& o, const std::string& v) { return one_of_names(v, {"blocked", "sweep", "aten"}, &o.path); }},
        {"sweep", "0 or 1", "", [](Overrides& o, const std::string& v) { return one_of(v, {0, 1}, &o.sweep); }},
        {"sweep_rows", "64 or 128", "",
         [](Overrides& o, const std::string& v) { return one_of(v, {64, 128}, &o.sweep_rows); }},
        {"sweep_cols", "1, 2, 4, 8 or 16", "",
         [](Overrides& o, const std::string& v) { return one_of(v, {1, 2, 4, 8, 16}, &o.sweep_cols); }},
        {"sweep_segment", "an integer in 1..4096", "",
         [](Overrides& o, const std::string& v) {
           int64_t x = 0;
           if (!parse_int(v, 1, 4096, &x)) return false;
           o.sweep_segment = static_cast<int>(x);
           return true;
         }},
        {"inverse", "solve or kernel", "",
         [](Overrides& o, const std::string& v) { return one_of_names(v, {"solve", "kernel"}, &o.inverse); }},
    };
    k->insert(k->end(), rest.begin(), rest.end());
    return k;
  }();
  return *all;
}
static_assert(static_cast<int>(LargePath::kBlocked) == 0 && static_cast<int>(LargePath::kSweep) == 1 &&
                  static_cast<int>(LargePath::kAten) == 2,
              "the override path's names are LargePath's, in its order");
static_assert(kDiagInverseMaxNB == 1024, "the accepted text of nb, table_nb and ib names 1024");

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string key_names() {
  std::string r;
  for (const Key& k : keys()) r += (r.empty() ? "" : ", ") + k.name;
  return r;
}

// Parses spec into *o and its canonical form into *canonical; returns the error ("" when none).
std::string parse_spec(const std::string& spec, Overrides* o, std::string* canonical) {
  const std::vector<Key>& kKeys = keys();
  const size_t kNumKeys = kKeys.size();
  std::vector<std::string> values(kNumKeys);
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string item = trim(spec.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "' is not key=value";
    const std::string name = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    size_t i = 0;
    while (i < kNumKeys && name != kKeys[i].name) ++i;
    if (i == kNumKeys) return "unknown key '" + name + "' (keys: " + key_names() + ")";
    if (!values[i].empty()) return name + " is given twice";
    if (!kKeys[i].set(*o, value)) return name + "=" + value + ": expected " + kKeys[i].accepts;
    const bool number = value.find_first_not_of("0123456789") == std::string::npos;
    values[i] = number ? std::to_string(std::stoll(value)) : value;  // 064 -> 64
  }
  if (o->nb > 0 && o->table_nb > 0) return "nb and table_nb exclude each other";
  canonical->clear();
  for (size_t i = 0; i < kNumKeys; ++i) {
    if (values[i].empty() || values[i] == kKeys[i].unforced) continue;
    *canonical += (canonical->empty() ? "" : ",") + std::string(kKeys[i].name) + "=" + values[i];
  }
  return "";
}

// One object per canonical spec, kept to the end: a solve may still read one that was replaced.
std::mutex g_mutex;
std::map<std::string, std::unique_ptr<Overrides>>& interned() {
  static auto* objects = new std::map<std::string, std::unique_ptr<Overrides>>();
  return *objects;
}
std::string g_env_error;  // HSMA_TRSM_OVERRIDES did not parse (raised by _get_overrides)

void publish(const Overrides& parsed, const std::string& canonical) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_env_error.clear();
  if (canonical.empty()) {
    g_overrides.store(&kNoOverrides, std::memory_order_release);
    return;
  }
  auto it = interned().find(canonical);
  if (it == interned().end()) {
    it = interned().emplace(canonical, std::make_unique<Overrides>(parsed)).first;
    it->second->spec = it->first.c_str();  // the map's key: as long-lived as the object
  }
  g_overrides.store(it->second.get(), std::memory_order_release);
}

// Read once, when the library loads. An error is kept for _get_overrides, which hsma_trsm's import
// calls, so that a bad value stops the import with the key named.
const bool g_env_read = [] {
  const char* env = std::getenv("HSMA_TRSM_OVERRIDES");
  if (env == nullptr || *env == '\0') return false;
  Overrides o;
  std::string canonical;
  const std::string error = parse_spec(env, &o, &canonical);
  if (error.empty()) {
    publish(o, canonical);
  } else {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_env_error = error;
  }
  return true;
}();

std::string get_overrides_op() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    TORCH_CHECK_VALUE(g_env_error.empty(), "hsma_trsm: HSMA_TRSM_OVERRIDES: ", g_env_error);
  }
  return overrides().spec;
}

void set_overrides_op(c10::string_view spec) { set_overrides(std::string(spec)); }

// Whether this build has the ablation kernel (HSMA_TRSM_ABLATION=1 at build time: small_kernel=pipeline).
bool ablation_built_op() {
#ifdef HSMA_TRSM_ABLATION
  return true;
#else
  return false;
#endif
}

}  // namespace

void set_overrides(const std::string& spec) {
  Overrides o;
  std::string canonical;
  const std::string error = parse_spec(spec, &o, &canonical);
  TORCH_CHECK_VALUE(error.empty(), "hsma_trsm overrides: ", error);
  publish(o, canonical);
}

std::string table_path_from_env() {
  const char* env = std::getenv("HSMA_TRSM_TABLE");
  return env != nullptr ? env : "";
}

std::string paths_path_from_env() {
  static const std::string path = [] {  // once: the plan's memo (plan_hands_off) relies on it
    const char* env = std::getenv("HSMA_TRSM_PATHS");
    return std::string(env != nullptr ? env : "");
  }();
  return path;
}

}  // namespace hsma

TORCH_LIBRARY_FRAGMENT(hsma, m) {
  m.def("_set_overrides(str spec) -> ()", &hsma::set_overrides_op);
  m.def("_get_overrides() -> str", &hsma::get_overrides_op);
  m.def("_ablation_built() -> bool", &hsma::ablation_built_op);
}
