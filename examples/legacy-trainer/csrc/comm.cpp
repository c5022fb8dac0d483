// The trainer's C++ extension: it hands the NCCL communicator of a process group to a
// custom kernel library, with the idiom public extensions use (cast, null check,
// getCommPtr). Under torch 2.15's nccl2 the cast gives null: `ncclx migrate` reports it.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/extension.h>

int64_t nccl_comm_ptr(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto backend = pg->getBackend(c10d::ProcessGroup::BackendType::NCCL);
  auto* nccl_pg = dynamic_cast<c10d::ProcessGroupNCCL*>(backend.get());
  TORCH_CHECK(nccl_pg != nullptr, "Backend is not ProcessGroupNCCL");
  return nccl_pg->getCommPtr();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("nccl_comm_ptr", &nccl_comm_ptr, "the ncclComm_t of a process group, as an integer");
}
