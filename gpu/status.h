/*
 * status.h -- the CUDA runtime's, cuBLAS's and cuDNN's statuses sorted into
 * gpu/recover.h's faults.  Plain C over the libraries' enums only (no call
 * into them), so tests/gpu/test_gpu_recover.c checks it on the host.
 *
 * Sources (CUDA 13.0 / cuDNN 9 headers, gpu/README.md "Checked against"):
 *  - driver_types.h marks as sticky the errors after which "the process
 *    must be terminated and relaunched": 226 (Contained), 700 IllegalAddress,
 *    702 LaunchTimeout, 710 Assert, 714 HardwareStackError, 715
 *    IllegalInstruction, 716 MisalignedAddress, 717 InvalidAddressSpace,
 *    718 InvalidPc, 719 LaunchFailure, 721 TensorMemoryLeak, 810
 *    MpsClientTerminated, 911 ExternalDevice; plus 214 ECCUncorrectable and
 *    999 Unknown, which leave the context unusable too;
 *  - only cudaErrorMemoryAllocation means out of device memory;
 *  - cuDNN 9 statuses are category + detail (cudnn_graph.h): allocation
 *    failures are INTERNAL_ERROR_HOST_ALLOCATION_FAILED (4003, the old
 *    CUDNN_STATUS_ALLOC_FAILED) and INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
 *    (4004); BAD_PARAM_MISALIGNED_POINTER is 2003; the NOT_SUPPORTED
 *    category (3000 + n) means "not this algorithm"; EXECUTION_FAILED_CUDART
 *    and _CUDA_DRIVER mean the context may be broken: the runtime's own
 *    status then says which (gpu_cudnn_fault asks cudaPeekAtLastError's
 *    value, passed in as `last`).
 */
#ifndef CNN_GPU_STATUS_H
#define CNN_GPU_STATUS_H

#include <cublas_api.h>
#include <cudnn_graph.h>
#include <driver_types.h>

#include "recover.h"

static inline gpu_fault gpu_cuda_fault(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return GPU_FAULT_NONE;
  case cudaErrorMemoryAllocation: return GPU_FAULT_MEMORY;
  case cudaErrorContained:
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorTensorMemoryLeak:
  case cudaErrorMpsClientTerminated:
  case cudaErrorExternalDevice:
  case cudaErrorECCUncorrectable:
  case cudaErrorUnknown: return GPU_FAULT_STICKY;
  default: return GPU_FAULT_OTHER;
  }
}

static inline gpu_fault gpu_cublas_fault(cublasStatus_t s, cudaError_t last) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return GPU_FAULT_NONE;
  case CUBLAS_STATUS_ALLOC_FAILED: return GPU_FAULT_MEMORY;
  case CUBLAS_STATUS_NOT_SUPPORTED: return GPU_FAULT_UNSUPPORTED;
  case CUBLAS_STATUS_EXECUTION_FAILED:
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return gpu_cuda_fault(last) == GPU_FAULT_STICKY ? GPU_FAULT_STICKY : GPU_FAULT_OTHER;
  default: return GPU_FAULT_OTHER;
  }
}

static inline gpu_fault gpu_cudnn_fault(cudnnStatus_t s, cudaError_t last) {
  int code = (int)s, category = CUDNN_STATUS_CATEGORY(code);
  if (code == CUDNN_STATUS_SUCCESS) return GPU_FAULT_NONE;
  if (code == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      code == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    return GPU_FAULT_MEMORY;
  if (code == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER) return GPU_FAULT_MISALIGNED;
  if (category == CUDNN_STATUS_NOT_SUPPORTED) return GPU_FAULT_UNSUPPORTED;
  if (category == CUDNN_STATUS_EXECUTION_FAILED || category == CUDNN_STATUS_INTERNAL_ERROR)
    return gpu_cuda_fault(last) == GPU_FAULT_STICKY ? GPU_FAULT_STICKY : GPU_FAULT_OTHER;
  return GPU_FAULT_OTHER;
}

#endif
