// The tile language's IR builder for the Python frontend (tessera/language): expressions, buffers,
// regions and tessera::tl::KernelBuilder. The frontend sets the kernel source line before it creates
// nodes (set_loc), so errors found by the passes point at the author's line.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tessera/core/error.h"
#include "tessera/tl/builder.h"
#include "tessera/tl/expr_ops.h"
#include "tessera/tl/printer.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using namespace tessera::tl;

BinOp binop_from(const std::string& op) {
  static const std::pair<const char*, BinOp> kOps[] = {
      {"+", BinOp::kAdd},       {"-", BinOp::kSub},      {"*", BinOp::kMul},    {"/", BinOp::kDiv},
      {"//", BinOp::kFloorDiv}, {"%", BinOp::kFloorMod}, {"min", BinOp::kMin},  {"max", BinOp::kMax},
      {"&", BinOp::kBitAnd},    {"|", BinOp::kBitOr},    {"^", BinOp::kBitXor}, {"<<", BinOp::kShl},
      {">>", BinOp::kShr}};
  for (const auto& [name, value] : kOps)
    if (op == name) return value;
  fail(ErrorCode::kInvalidArgument, "tl: unknown binary operator '", op, "'");
}

CmpOp cmpop_from(const std::string& op) {
  static const std::pair<const char*, CmpOp> kOps[] = {{"<", CmpOp::kLT},  {"<=", CmpOp::kLE}, {">", CmpOp::kGT},
                                                       {">=", CmpOp::kGE}, {"==", CmpOp::kEQ}, {"!=", CmpOp::kNE}};
  for (const auto& [name, value] : kOps)
    if (op == name) return value;
  fail(ErrorCode::kInvalidArgument, "tl: unknown comparison '", op, "'");
}

Intrinsic intrinsic_from(const std::string& name) {
  for (int i = 0; i < int(Intrinsic::kExtern); ++i)
    if (name == intrinsic_name(Intrinsic(i))) return Intrinsic(i);
  fail(ErrorCode::kInvalidArgument, "tl: unknown math function '", name, "'");
}

Scope scope_from(const std::string& s) {
  if (s == "shared" || s == "shared.dyn") return Scope::kShared;
  if (s == "fragment" || s == "local.fragment") return Scope::kFragment;
  if (s == "local" || s == "local.var") return Scope::kLocal;
  if (s == "global") return Scope::kGlobal;
  fail(ErrorCode::kInvalidArgument, "tl: unknown memory scope '", s, "'");
}

ForKind for_kind_from(const std::string& k) {
  for (int i = 0; i <= int(ForKind::kVectorized); ++i)
    if (k == for_kind_name(ForKind(i))) return ForKind(i);
  fail(ErrorCode::kInvalidArgument, "tl: unknown loop kind '", k, "'");
}

ReduceKind reduce_from(const std::string& k) {
  for (int i = 0; i <= int(ReduceKind::kAbsMax); ++i)
    if (k == reduce_kind_name(ReduceKind(i))) return ReduceKind(i);
  fail(ErrorCode::kInvalidArgument, "tl: unknown reduction '", k, "'");
}

AtomicKind atomic_from(const std::string& k) {
  for (int i = 0; i <= int(AtomicKind::kMin); ++i)
    if (k == atomic_kind_name(AtomicKind(i))) return AtomicKind(i);
  fail(ErrorCode::kInvalidArgument, "tl: unknown atomic operation '", k, "'");
}

void set_loc(const std::string& file, int line) {
  set_current_loc(Loc::make(file, line));
}

}  // namespace

void bind_tl(nb::module_& m) {
  nb::class_<Expr>(m, "TlExpr", "A tile-language IR expression (tessera.language wraps it).")
      .def_prop_ro("dtype", [](const Expr& e) { return std::string(type_name(e.type())); })
      .def_prop_ro("kind", [](const Expr& e) { return std::string(node_kind_name(e->kind)); })
      .def("const_int",
           [](const Expr& e) -> std::optional<int64_t> {
             int64_t v;
             if (is_const_int(e, &v)) return v;
             return std::nullopt;
           })
      .def("const_value",
           [](const Expr& e) -> std::optional<double> {
             double v;
             if (is_const_number(e, &v)) return v;
             return std::nullopt;
           })
      .def("var_name",
           [](const Expr& e) -> std::optional<std::string> {
             if (const VarNode* v = e.as<VarNode>()) return v->name;
             return std::nullopt;
           })
      .def("same_as", [](const Expr& a, const Expr& b) { return a.same_as(b); })
      .def("__str__", [](const Expr& e) { return to_string(e); });

  nb::class_<Buffer>(m, "TlBuffer", "A tile-language buffer (parameter or on-chip allocation).")
      .def_prop_ro("name", [](const Buffer& b) { return b->name; })
      .def_prop_ro("dtype", [](const Buffer& b) { return std::string(type_name(b->dtype)); })
      .def_prop_ro("scope", [](const Buffer& b) { return std::string(scope_name(b->scope)); })
      .def_prop_ro("shape", [](const Buffer& b) { return b->shape; });

  nb::class_<Region>(m, "TlRegion", "A rectangular part of a buffer (tile-op operand).");

  nb::class_<Program>(m, "TlProgram", "A finished tile-language program.")
      .def_prop_ro("name", [](const Program& p) { return p.name; })
      .def_prop_ro("param_names",
                   [](const Program& p) {
                     std::vector<std::string> names;
                     for (const Param& prm : p.params) names.push_back(prm.name);
                     return names;
                   })
      .def("__str__", [](const Program& p) { return to_string(p); });

  // ---- expressions ----
  m.def("tl_set_loc", &set_loc, nb::arg("file"), nb::arg("line"));
  m.def("tl_int",
        [](int64_t v, const std::string& dtype) { return IntImmNode::make(type_from_name(dtype), v, current_loc()); });
  m.def("tl_float",
        [](double v, const std::string& dtype) { return FloatImmNode::make(type_from_name(dtype), v, current_loc()); });
  m.def("tl_binary", [](const std::string& op, const Expr& a, const Expr& b) { return binary(binop_from(op), a, b); });
  m.def("tl_compare",
        [](const std::string& op, const Expr& a, const Expr& b) { return compare(cmpop_from(op), a, b); });
  m.def("tl_and", [](const Expr& a, const Expr& b) { return logical_and(a, b); });
  m.def("tl_or", [](const Expr& a, const Expr& b) { return logical_or(a, b); });
  m.def("tl_not", [](const Expr& a) { return !a; });
  m.def("tl_select", [](const Expr& c, const Expr& t, const Expr& f) { return select(c, t, f); });
  m.def("tl_cast", [](const std::string& dtype, const Expr& v) { return cast(type_from_name(dtype), v); });
  m.def("tl_call",
        [](const std::string& name, std::vector<Expr> args) { return call(intrinsic_from(name), std::move(args)); });
  m.def("tl_ceildiv", [](const Expr& a, const Expr& b) { return ceildiv(a, b); });
  m.def("tl_infinity", [](const std::string& dtype) { return infinity(type_from_name(dtype)); });
  m.def("tl_load",
        [](const Buffer& b, std::vector<Expr> idx) { return LoadNode::make(b, std::move(idx), current_loc()); });
  m.def(
      "tl_region",
      [](const Buffer& b, std::vector<Expr> mins, std::optional<std::vector<Expr>> extents) {
        return extents ? region(b, mins, *extents) : corner(b, mins);
      },
      nb::arg("buffer"), nb::arg("mins"), nb::arg("extents").none());
  m.def("tl_whole", [](const Buffer& b) { return Region::whole(b); });
  m.def("tl_dtype_name", [](const std::string& name) { return std::string(type_name(type_from_name(name))); });

  // ---- the builder ----
  nb::class_<KernelBuilder>(m, "TlBuilder", "tessera::tl::KernelBuilder")
      .def("__init__", [](KernelBuilder* self, const std::string& name, const std::string& file,
                          int line) { new (self) KernelBuilder(name, Loc::make(file, line)); })
      .def("set_loc", [](KernelBuilder& b, const std::string& file, int line) { b.set_loc(Loc::make(file, line)); })
      .def("dynamic", &KernelBuilder::dynamic)
      .def("tensor", [](KernelBuilder& b, const std::string& name, const std::vector<Expr>& shape,
                        const std::string& dtype) { return b.tensor(name, shape, type_from_name(dtype)); })
      .def("scalar", [](KernelBuilder& b, const std::string& name,
                        const std::string& dtype) { return b.scalar(name, type_from_name(dtype)); })
      .def("scratch_tensor",
           [](KernelBuilder& b, const std::string& name, const std::vector<Expr>& shape, const std::string& dtype) {
             return b.scratch_tensor(name, shape, type_from_name(dtype));
           })
      .def("begin_kernel", &KernelBuilder::begin_kernel)
      .def("end_kernel", &KernelBuilder::end_kernel)
      .def("split_launch", &KernelBuilder::split_launch)
      .def("kernel_allocs", &KernelBuilder::kernel_allocs)
      .def("alloc",
           [](KernelBuilder& b, const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
              const std::string& scope) { return b.alloc(name, shape, type_from_name(dtype), scope_from(scope)); })
      .def("tensor_at",
           [](KernelBuilder& b, const std::string& name, const std::vector<Expr>& shape, const std::string& dtype,
              const Expr& address) { return b.tensor_at(name, shape, type_from_name(dtype), address); })
      .def("begin_for",
           [](KernelBuilder& b, const std::string& var, const Expr& mn, const Expr& extent, const std::string& kind,
              int stages) { return b.begin_for(var, mn, extent, for_kind_from(kind), stages); })
      .def("begin_parallel", &KernelBuilder::begin_parallel)
      .def("end_for", &KernelBuilder::end_for)
      .def("begin_if", &KernelBuilder::begin_if)
      .def("begin_else", &KernelBuilder::begin_else)
      .def("end_if", &KernelBuilder::end_if)
      .def("let", &KernelBuilder::let)
      .def("store", &KernelBuilder::store)
      .def("copy", &KernelBuilder::copy)
      .def("gemm", &KernelBuilder::gemm)
      .def("fill", &KernelBuilder::fill)
      .def("reduce", [](KernelBuilder& b, const std::string& op, const Region& src, const Region& dst, int dim,
                        bool clear) { b.reduce(reduce_from(op), src, dst, dim, clear); })
      .def("cumsum", &KernelBuilder::cumsum)
      .def("atomic_region", [](KernelBuilder& b, const std::string& op, const Region& dst,
                               const Region& src) { b.atomic(atomic_from(op), dst, src); })
      .def("atomic_value", [](KernelBuilder& b, const std::string& op, const Region& dst,
                              const Expr& v) { b.atomic(atomic_from(op), dst, v); })
      .def("finish", &KernelBuilder::finish);
}

}  // namespace tessera::python
