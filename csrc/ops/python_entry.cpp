// The Python module hsma_trsm._C (the same shared library that registers torch.ops.hsma): trsm and
// solve_triangular, the eager entries of hsma_trsm.trsm and hsma_trsm.solve_triangular, and cholesky_solve,
// cholesky_inverse and lu_solve, the eager entries of hsma_trsm's solvers (hsma_trsm/solvers.py), on the same terms.
//
// torch.ops.hsma.trsm(...) reaches the dispatcher through a boxed call: the arguments are matched
// to the schema by name and converted to a stack of IValues, then unboxed again for the kernels.
// For a small solve that is a few microseconds of host time per call, more than the kernel takes
// (benchmarks/results, overhead suite). This entry takes the positional arguments as they are and
// makes the typed dispatcher call (hsma::call_trsm), so every dispatch key still runs: autograd
// (reverse and forward), functorch transforms, vmap's batch rule, TorchDispatchModes, the
// profiler, CUDA-graph capture. It returns None instead, and the caller takes torch.ops' path,
// whenever that path would do something this one does not: an argument that is not a plain
// Tensor (a subclass, whose __torch_function__ must run), an active TorchFunctionMode other
// than torch's own DeviceContext (see modes_pass_through), a pending "skip the next
// __torch_function__" (torch.overrides.redispatch_function), an argument of another Python type
// than the schema's (hsma_trsm/api.py then raises torch's TypeError, or converts a NumPy alpha),
// or A and B not of one supported dtype (api.py promotes them or raises UnsupportedDtypeError).
// The checks cost nothing on this path: they only run after a decline. The solvers' entries decline
// whatever torch's function would not take as given (solvers.h: operands_fit, pivots_fit), so that
// solvers.py raises torch's error or converts; on the CPU without a gradient they call torch's function itself.
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/version.h>

#include "ops/solvers.h"
#include "ops/switch.h"
#include "trsm.h"

namespace hsma {
namespace {

bool plain_tensor(PyObject* obj) { return THPVariable_CheckExact(obj); }

// True when no TorchFunctionMode is active, or only torch.utils._device.DeviceContext, the mode of
// torch.set_default_device and `with torch.device(...)`: its __torch_function__ only fills in the
// device of factory functions and calls every other function as it is, so for this op it is the
// plain call (the op allocates X on A's and B's device in C++), made with the mode off the stack
// as torch does while a mode's __torch_function__ runs (StashMode). Nested DeviceContexts, a
// subclass of it, or any other mode: false (torch.ops' path). Called with the GIL held.
bool modes_pass_through() {
  if (!at::impl::torch_function_mode_enabled()) return true;
  if (at::impl::PythonTorchFunctionTLS::stack_len() != 1) return false;
  // The class, once torch.utils._device is loaded (a DeviceContext exists only then; it is never
  // imported from here). The GIL orders the threads; the reference is kept for the process.
  static PyObject* device_context = nullptr;
  if (device_context == nullptr) {
    PyObject* name = PyUnicode_FromString("torch.utils._device");
    PyObject* module = name != nullptr ? PyImport_GetModule(name) : nullptr;
    Py_XDECREF(name);
    if (module != nullptr) {
      device_context = PyObject_GetAttrString(module, "DeviceContext");
      Py_DECREF(module);
    }
    if (device_context == nullptr) {
      PyErr_Clear();
      return false;
    }
  }
  const auto& mode = at::impl::PythonTorchFunctionTLS::get_stack_at(0);
  return mode != nullptr && reinterpret_cast<PyObject*>(Py_TYPE(mode->ptr(getPyInterpreter()))) == device_context;
}

// While alive, the top TorchFunctionMode (when `stash`) is off the stack, as torch keeps it while
// the mode's __torch_function__ runs: Python code the dispatcher reaches during the call (a
// TorchDispatchMode, a Python kernel) then sees no default device, as through torch.ops.
class StashMode {
 public:
  explicit StashMode(bool stash) : stash_(stash) {
    if (stash_) mode_ = at::impl::PythonTorchFunctionTLS::pop_stack();
  }
  ~StashMode() {
    if (stash_) at::impl::PythonTorchFunctionTLS::push_onto_stack(mode_);
  }
  StashMode(const StashMode&) = delete;
  StashMode& operator=(const StashMode&) = delete;

 private:
  bool stash_;
  std::shared_ptr<c10::SafePyObject> mode_;
};

// *out = obj's value when obj is exactly True or False.
bool as_bool(PyObject* obj, bool* out) {
  if (obj != Py_True && obj != Py_False) return false;
  *out = obj == Py_True;
  return true;
}

// *out = obj's value when obj is exactly an int (within int64), a float or a complex (not a bool,
// a NumPy scalar or a 0-dim tensor: torch.ops converts those).
bool as_scalar(PyObject* obj, c10::Scalar* out) {
  if (PyLong_CheckExact(obj)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    *out = c10::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_CheckExact(obj)) {
    *out = c10::Scalar(PyFloat_AS_DOUBLE(obj));
    return true;
  }
  if (PyComplex_CheckExact(obj)) {
    *out = c10::Scalar(c10::complex<double>(PyComplex_RealAsDouble(obj), PyComplex_ImagAsDouble(obj)));
    return true;
  }
  return false;
}

// Whether the call may be taken here: its tensors plain, no mode but a DeviceContext, no pending skip of
// __torch_function__ (see the top).
bool takes_call(PyObject* const* tensors, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!plain_tensor(tensors[i])) return false;
  if (!modes_pass_through()) return false;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
  // torch.overrides.redispatch_function set "skip the next __torch_function__": torch.ops' check
  // consumes that flag (and errs if none does), so leave this call to it.
  if (at::impl::PythonTorchFunctionTLS::peek_skip_next()) return false;
#endif
  return true;
}

// Runs `call` (a typed dispatcher call) without the GIL and with a DeviceContext mode off the stack.
template <typename Call> PyObject* run_call(Call call) {
  at::Tensor X;
  {
    const StashMode stash(at::impl::torch_function_mode_enabled());  // (then the mode is a DeviceContext)
    pybind11::gil_scoped_release no_gil;
    X = call();
  }
  return THPVariable_Wrap(std::move(X));
}

// Whether nargs is n; a TypeError naming the entry and its arguments otherwise.
bool arity(Py_ssize_t nargs, Py_ssize_t n, const char* usage) {
  if (nargs == n) return true;
  PyErr_SetString(PyExc_TypeError, usage);
  return false;
}

// On the CPU, for calls that record no gradient, the solvers' eager entries are torch's functions (LAPACK's potrs,
// potri, getrs), as the drop-in's CPU solve is: hsma's compositions there add trsm's copies and, for LU, a k x k
// permutation matrix per call (0.2-0.5x torch). operands_fit holds, so torch takes the arguments. Calls that
// record a gradient keep the compositions, whose gradients leave the unread triangle alone (torch's formulas give
// it one); cholesky_inverse keeps them for complex L too, where LAPACK's potri drops the imaginary part of L's
// diagonal.
bool cpu_without_grad(std::initializer_list<const at::Tensor*> ts) {
  const bool grad_mode = at::GradMode::is_enabled();
  for (const at::Tensor* t : ts)
    if (!t->is_cpu() || (grad_mode && t->requires_grad()) || t->_fw_grad(/*level=*/0).defined()) return false;
  return true;
}

// _C.cholesky_solve(B, L, upper) -> Tensor, or None.
PyObject* cholesky_solve_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 3, "hsma_trsm._C.cholesky_solve takes 3 positional arguments (B, L, upper)")) return nullptr;
  bool upper;
  if (!takes_call(args, 2) || !as_bool(args[2], &upper)) Py_RETURN_NONE;
  const at::Tensor& B = THPVariable_Unpack(args[0]);
  const at::Tensor& L = THPVariable_Unpack(args[1]);
  if (!operands_fit(L, B, -2)) Py_RETURN_NONE;
  if (cpu_without_grad({&B, &L})) return run_call([&] { return at::cholesky_solve(B, L, upper); });
  static const auto op = hsma_op<at::Tensor(const at::Tensor&, const at::Tensor&, bool)>("hsma::cholesky_solve");
  return run_call([&] { return op.call(B, L, upper); });
  END_HANDLE_TH_ERRORS
}

// _C.cholesky_inverse(L, upper) -> Tensor, or None.
PyObject* cholesky_inverse_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 2, "hsma_trsm._C.cholesky_inverse takes 2 positional arguments (L, upper)")) return nullptr;
  bool upper;
  if (!takes_call(args, 1) || !as_bool(args[1], &upper)) Py_RETURN_NONE;
  const at::Tensor& L = THPVariable_Unpack(args[0]);
  if (!operands_fit(L, L, -2)) Py_RETURN_NONE;
  if (!L.is_complex() && cpu_without_grad({&L})) return run_call([&] { return at::cholesky_inverse(L, upper); });
  static const auto op = hsma_op<at::Tensor(const at::Tensor&, bool)>("hsma::cholesky_inverse");
  return run_call([&] { return op.call(L, upper); });
  END_HANDLE_TH_ERRORS
}

// _C.lu_solve(LU, pivots, B, left, adjoint) -> Tensor, or None.
PyObject* lu_solve_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 5, "hsma_trsm._C.lu_solve takes 5 positional arguments (LU, pivots, B, left, adjoint)"))
    return nullptr;
  bool left, adjoint;
  if (!takes_call(args, 3) || !as_bool(args[3], &left) || !as_bool(args[4], &adjoint)) Py_RETURN_NONE;
  const at::Tensor& LU = THPVariable_Unpack(args[0]);
  const at::Tensor& pivots = THPVariable_Unpack(args[1]);
  const at::Tensor& B = THPVariable_Unpack(args[2]);
  if (!pivots_fit(LU, pivots) || !operands_fit(LU, B, left ? -2 : -1)) Py_RETURN_NONE;
  if (cpu_without_grad({&LU, &B}))
    return run_call([&] { return at::linalg_lu_solve(LU, pivots, B, left, adjoint); });
  static const auto op = hsma_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, bool)>(
      "hsma::lu_solve");
  return run_call([&] { return op.call(LU, pivots, B, left, adjoint); });
  END_HANDLE_TH_ERRORS
}

// _C.trsm(A, B, left, upper, trans, unitriangular, alpha) -> Tensor, or None (see the top).
PyObject* trsm_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 7, "hsma_trsm._C.trsm takes 7 positional arguments (A, B, left, upper, trans, unitriangular, "
                      "alpha)"))
    return nullptr;
  if (!takes_call(args, 2)) Py_RETURN_NONE;
  bool left, upper, unit;
  c10::Scalar alpha;
  if (!as_bool(args[2], &left) || !as_bool(args[3], &upper) || !as_bool(args[5], &unit) || !PyUnicode_Check(args[4]) ||
      !as_scalar(args[6], &alpha))
    Py_RETURN_NONE;
  Py_ssize_t trans_len = 0;
  const char* trans = PyUnicode_AsUTF8AndSize(args[4], &trans_len);
  if (trans == nullptr) {  // not encodable (a lone surrogate): torch.ops' error
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  const at::Tensor& A = THPVariable_Unpack(args[0]);
  const at::Tensor& B = THPVariable_Unpack(args[1]);
  if (A.scalar_type() != B.scalar_type() || !supported_dtype(A.scalar_type())) Py_RETURN_NONE;
  const c10::string_view op(trans, static_cast<size_t>(trans_len));
  return run_call([&] { return call_trsm(A, B, left, upper, op, unit, alpha); });
  END_HANDLE_TH_ERRORS
}

// The drop-in's solve of (A, B) (Python objects) with its flags: a new reference, or None where the call is not
// taken here. On the CPU (float32, float64, complex) and where hsma's plan hands a CUDA solve to torch's kernel
// (plan_hands_off) it is torch.linalg.solve_triangular itself, result layout and autograd included; otherwise
// trsm's entry.
PyObject* solve_triangular_call(PyObject* const* tensors, bool upper, bool left, bool unit) {
  if (!takes_call(tensors, 2)) Py_RETURN_NONE;
  const at::Tensor& A = THPVariable_Unpack(tensors[0]);
  const at::Tensor& B = THPVariable_Unpack(tensors[1]);
  if (A.scalar_type() != B.scalar_type() || !supported_dtype(A.scalar_type())) Py_RETURN_NONE;
  return run_call([&] {
    if (A.is_cpu() && B.is_cpu() && !half_dtype(A.scalar_type())) {
      // The CPU solve is torch's LAPACK call on every path: torch's function itself, without trsm's copy into a
      // contiguous result; trsm's checks first, so that the errors are hsma's (naming the public function).
      check_trsm(A, B, make_args(left, upper, "N", unit, 1), "hsma::trsm");
      return at::linalg_solve_triangular(A, B, upper, left, unit);
    }
    if (plan_hands_off(A, B, left, upper, "N", unit)) return at::linalg_solve_triangular(A, B, upper, left, unit);
    return call_trsm(A, B, left, upper, "N", unit, 1);
  });
}

// _C.solve_triangular(A, B, upper, left, unitriangular) -> Tensor, or None: the drop-in's eager entry, positional.
PyObject* solve_triangular_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 5, "hsma_trsm._C.solve_triangular takes 5 positional arguments (A, B, upper, left, "
                      "unitriangular)"))
    return nullptr;
  bool upper, left, unit;
  if (!as_bool(args[2], &upper) || !as_bool(args[3], &left) || !as_bool(args[4], &unit)) Py_RETURN_NONE;
  return solve_triangular_call(args, upper, left, unit);
  END_HANDLE_TH_ERRORS
}

// hsma_trsm.solve_triangular itself (made by _C.public_solve_triangular): torch's signature (A, B, *, upper,
// left=True, unitriangular=False, out=None) taken here without a Python frame, which costs about 0.8 us a call.
// Every call it does not take (out=, another argument type or name, a call solve_triangular_call declines, an
// error) goes as it is to the Python implementation (hsma_trsm/api.py), which raises the public function's errors.
PyObject* g_solve_triangular_py = nullptr;  // that implementation; set once, kept for the process

PyObject* solve_triangular_public(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  // The keyword names, interned once: a call's names are interned too, so they compare by identity.
  static PyObject* const names[4] = {PyUnicode_InternFromString("upper"), PyUnicode_InternFromString("left"),
                                     PyUnicode_InternFromString("unitriangular"), PyUnicode_InternFromString("out")};
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  bool upper = false, left = true, unit = false, has_upper = false, taken = nargs == 2;
  for (Py_ssize_t k = 0; taken && k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    PyObject* value = args[nargs + k];
    int which = 0;
    while (which < 4 && names[which] != name) ++which;
    for (int i = 0; which == 4 && i < 4; ++i)  // a name built at run time: by value
      if (names[i] != nullptr && PyUnicode_Compare(name, names[i]) == 0) which = i;
    if (PyErr_Occurred()) PyErr_Clear();  // (interning failed: the Python implementation takes the call)
    if (which == 0)
      taken = has_upper = as_bool(value, &upper);
    else if (which == 1)
      taken = as_bool(value, &left);
    else if (which == 2)
      taken = as_bool(value, &unit);
    else
      taken = which == 3 && value == Py_None;
  }
  if (taken && has_upper) {
    PyObject* X = nullptr;
    try {
      X = solve_triangular_call(args, upper, left, unit);
    } catch (const c10::Error&) {  // the Python implementation raises it again, under the public function's name
      X = nullptr;
    } catch (python_error& e) {  // from a Python kernel (meta) or a mode: the same for an Exception, else (an
      e.restore();               // interrupt) it propagates as it is
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return nullptr;
      X = nullptr;
    } catch (pybind11::error_already_set& e) {  // (the same, as pybind11 carries it)
      if (!e.matches(PyExc_Exception)) throw;
      X = nullptr;
    }
    if (X != nullptr && X != Py_None) return X;
    Py_XDECREF(X);
  }
  PyErr_Clear();
  return PyObject_Vectorcall(g_solve_triangular_py, args, static_cast<size_t>(nargs), kwnames);
  END_HANDLE_TH_ERRORS
}

// _C.public_solve_triangular(implementation, doc) -> builtin function: hsma_trsm.solve_triangular (above), with
// `doc` (its first line "solve_triangular(...)\n--\n\n", the signature Python reads) as __doc__.
PyObject* make_public_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (!arity(nargs, 2, "hsma_trsm._C.public_solve_triangular takes 2 positional arguments (implementation, doc)"))
    return nullptr;
  Py_ssize_t size = 0;
  const char* doc = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8AndSize(args[1], &size) : nullptr;
  if (!PyCallable_Check(args[0]) || doc == nullptr) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "hsma_trsm._C.public_solve_triangular takes a callable and a str");
    return nullptr;
  }
  // The method definition and its doc live as long as the function, i.e. the process.
  const char* kept_doc = (new std::string(doc, static_cast<size_t>(size)))->c_str();
  auto* def = new PyMethodDef{"solve_triangular",
                              reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(solve_triangular_public)),
                              METH_FASTCALL | METH_KEYWORDS, kept_doc};
  PyObject* module_name = PyUnicode_FromString("hsma_trsm");
  PyObject* fn = module_name != nullptr ? PyCFunction_NewEx(def, nullptr, module_name) : nullptr;
  Py_XDECREF(module_name);
  if (fn == nullptr) return nullptr;
  Py_INCREF(args[0]);
  Py_XSETREF(g_solve_triangular_py, args[0]);  // (a module reload: the new implementation serves every entry)
  return fn;
}

// _C.torch_solve_row_major(A, B) -> bool: the layout rule of torch's result (trsm.h), for solve_triangular's out=.
PyObject* row_major_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity(nargs, 2, "hsma_trsm._C.torch_solve_row_major takes 2 positional arguments (A, B)")) return nullptr;
  if (!THPVariable_Check(args[0]) || !THPVariable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "hsma_trsm._C.torch_solve_row_major: A and B must be tensors");
    return nullptr;
  }
  if (torch_solve_row_major(THPVariable_Unpack(args[0]), THPVariable_Unpack(args[1]))) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"trsm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(trsm_entry)), METH_FASTCALL,
     "trsm(A, B, left, upper, trans, unitriangular, alpha) -> Tensor or None: torch.ops.hsma.trsm by a typed "
     "dispatcher call, or None where torch.ops' path must be taken (see csrc/ops/python_entry.cpp)."},
    {"solve_triangular", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(solve_triangular_entry)),
     METH_FASTCALL, "solve_triangular(A, B, upper, left, unitriangular) -> Tensor or None: the drop-in's eager "
     "entry; torch's own function where hsma's plan hands the solve off, else as trsm."},
    {"public_solve_triangular", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(make_public_entry)),
     METH_FASTCALL, "public_solve_triangular(implementation, doc) -> builtin: hsma_trsm.solve_triangular, taken in C++ "
     "where it can be, else by the Python implementation."},
    {"cholesky_solve", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(cholesky_solve_entry)),
     METH_FASTCALL, "cholesky_solve(B, L, upper) -> Tensor or None: hsma.cholesky_solve (CPU, no grad: torch's)."},
    {"cholesky_inverse", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(cholesky_inverse_entry)),
     METH_FASTCALL, "cholesky_inverse(L, upper) -> Tensor or None: hsma.cholesky_inverse (CPU, no grad: torch's)."},
    {"lu_solve", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(lu_solve_entry)), METH_FASTCALL,
     "lu_solve(LU, pivots, B, left, adjoint) -> Tensor or None: torch.ops.hsma.lu_solve (CPU, no grad: torch's)."},
    {"torch_solve_row_major", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(row_major_entry)),
     METH_FASTCALL, "torch_solve_row_major(A, B) -> bool: whether torch.linalg.solve_triangular's result is "
     "row-major for these operands (csrc/trsm.h)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "hsma_trsm._C",
                          "Compiled part of hsma_trsm: registers torch.ops.hsma; the eager entries.", -1,
                          methods};

}  // namespace
}  // namespace hsma

namespace hsma {
namespace {

// torch.dtype of t, a new reference.
PyObject* dtype_object(at::ScalarType t) {
  PyObject* d = reinterpret_cast<PyObject*>(torch::getTHPDtype(t));
  Py_INCREF(d);
  return d;
}

// A tuple of the dtypes in `set`, as torch.dtype objects; nullptr with a Python error set on failure.
template <size_t N> PyObject* dtype_tuple(const std::array<at::ScalarType, N>& set) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(N));
  if (t == nullptr) return nullptr;
  for (size_t i = 0; i < N; ++i) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), dtype_object(set[i]));
  return t;
}

PyObject* str_tuple(const std::array<const char*, kRoutedOps.size()>& names) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(names.size()));
  if (t == nullptr) return nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    PyObject* s = PyUnicode_FromString(names[i]);
    if (s == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), s);
  }
  return t;
}

// The module's constants: the C++ decisions Python reads instead of copying them (trsm.h, ops/switch.h).
bool add_constants(PyObject* module) {
  const std::pair<const char*, PyObject*> items[] = {{"trsm_dtypes", dtype_tuple(kTrsmDtypes)},
                                                     {"half_dtypes", dtype_tuple(kHalfDtypes)},
                                                     {"half_partner", dtype_object(kHalfPartner)},
                                                     {"solver_dtypes", dtype_tuple(kSolverDtypes)},
                                                     {"routed_ops", str_tuple(kRoutedOps)}};
  bool ok = true;
  for (const auto& [name, value] : items) {
    if (value == nullptr || PyModule_AddObject(module, name, value) != 0) {
      Py_XDECREF(value);
      ok = false;
    }
  }
  return ok;
}

}  // namespace
}  // namespace hsma

PyMODINIT_FUNC PyInit__C() {
  PyObject* module = PyModule_Create(&hsma::module_def);
  if (module != nullptr && !hsma::add_constants(module)) Py_CLEAR(module);
  return module;
}
