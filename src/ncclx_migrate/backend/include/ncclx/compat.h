// ncclx/compat.h: which NCCL backend a c10d::Backend is, and its communicator, on every torch
// from 2.13 (C++17) to 2.15 (C++20). Shipped by ncclx-migrate; the include folder is
// ncclx_migrate.backend.get_include(). Header-only, all inline.
//
// Why: torch 2.15's default "nccl" is c10d::nccl2::ProcessGroupNCCL, a sibling of the legacy
// c10d::ProcessGroupNCCL under c10d::Backend, so dynamic_cast<c10d::ProcessGroupNCCL*> gives
// null there and static_cast is undefined behaviour (pytorch/TensorRT#4658).
//
// With USE_C10D_NCCL defined (as torch's own NCCL code is built), the kind comes from the type
// (dynamic_cast to each class the headers declare: the legacy class; on 2.14+ also
// c10d::nccl2::ProcessGroupNCCL and c10d::nccl2::ProcessGroupNCCLLazy, the "nccl-lazy" wrapper,
// a separate class that counts as nccl2 and whose communicator is its primary one). The
// extension then links torch_cuda (torch.utils.cpp_extension.CUDAExtension does). Without
// USE_C10D_NCCL no NCCL class is declared: the kind comes from getBackendName() ("nccl",
// "nccl2", "nccl-lazy"), and comm_ptr() throws, since getCommPtr() cannot be called.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#if __has_include(<torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>
#define NCCLX_COMPAT_HAS_NCCL2 1
#if __has_include(<torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLLazy.hpp>)
#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLLazy.hpp>
#define NCCLX_COMPAT_HAS_NCCL2_LAZY 1
#endif
#endif
#endif

namespace ncclx {

enum class NcclKind { kNotNccl, kLegacy, kNccl2 };

inline const char* nccl_kind_name(NcclKind kind) noexcept {
  switch (kind) {
    case NcclKind::kLegacy:
      return "nccl";
    case NcclKind::kNccl2:
      return "nccl2";
    case NcclKind::kNotNccl:
      break;
  }
  return "not-nccl";
}

inline NcclKind nccl_kind(const c10d::Backend* backend) noexcept {
  if (backend == nullptr) {
    return NcclKind::kNotNccl;
  }
#if defined(USE_C10D_NCCL)
  if (dynamic_cast<const c10d::ProcessGroupNCCL*>(backend) != nullptr) {
    return NcclKind::kLegacy;
  }
#if defined(NCCLX_COMPAT_HAS_NCCL2)
  if (dynamic_cast<const c10d::nccl2::ProcessGroupNCCL*>(backend) != nullptr) {
    return NcclKind::kNccl2;
  }
#endif
#if defined(NCCLX_COMPAT_HAS_NCCL2_LAZY)
  if (dynamic_cast<const c10d::nccl2::ProcessGroupNCCLLazy*>(backend) != nullptr) {
    return NcclKind::kNccl2;
  }
#endif
  return NcclKind::kNotNccl;
#else
  std::string name;
  try {
    name = backend->getBackendName();  // the base class's throws: not an NCCL backend
  } catch (const std::exception&) {
    return NcclKind::kNotNccl;
  }
  if (name == "nccl") {
    return NcclKind::kLegacy;
  }
  if (name == "nccl2" || name == "nccl-lazy") {
    return NcclKind::kNccl2;
  }
  return NcclKind::kNotNccl;
#endif
}

inline NcclKind nccl_kind(const c10::intrusive_ptr<c10d::Backend>& backend) noexcept {
  return nccl_kind(backend.get());
}

inline bool is_nccl(const c10d::Backend* backend) noexcept {
  return nccl_kind(backend) != NcclKind::kNotNccl;
}

inline bool is_nccl(const c10::intrusive_ptr<c10d::Backend>& backend) noexcept {
  return is_nccl(backend.get());
}

// The ncclComm_t of an NCCL backend, as an integer (reinterpret_cast<ncclComm_t>(...)).
inline int64_t comm_ptr(const c10d::Backend* backend) {
  const NcclKind kind = nccl_kind(backend);
  TORCH_CHECK(
      kind != NcclKind::kNotNccl,
      "ncclx::comm_ptr: the backend is not NCCL (",
      backend == nullptr ? std::string("null") : backend->getBackendName(),
      ")");
#if defined(USE_C10D_NCCL)
  // getCommPtr() is const on nccl2 only; the legacy one may create the communicator.
  if (auto* legacy = dynamic_cast<c10d::ProcessGroupNCCL*>(const_cast<c10d::Backend*>(backend))) {
    return legacy->getCommPtr();
  }
#if defined(NCCLX_COMPAT_HAS_NCCL2)
  if (auto* nccl2 = dynamic_cast<const c10d::nccl2::ProcessGroupNCCL*>(backend)) {
    return nccl2->getCommPtr();
  }
#endif
#if defined(NCCLX_COMPAT_HAS_NCCL2_LAZY)
  if (auto* lazy = dynamic_cast<const c10d::nccl2::ProcessGroupNCCLLazy*>(backend)) {
    return lazy->getPrimary()->getCommPtr();
  }
#endif
  TORCH_CHECK(false, "ncclx::comm_ptr: unreachable NCCL kind");
#else
  TORCH_CHECK(
      false,
      "ncclx::comm_ptr needs the NCCL classes: build the extension with USE_C10D_NCCL defined "
      "(define_macros=[(\"USE_C10D_NCCL\", None)]) against a CUDA build of torch");
#endif
}

inline int64_t comm_ptr(const c10::intrusive_ptr<c10d::Backend>& backend) {
  return comm_ptr(backend.get());
}

}  // namespace ncclx
