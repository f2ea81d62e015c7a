/* kernels_blob.S: embeds the HIP kernels' clang offload bundle (ACCL_HIP_BUNDLE_PATH, set by
   cmake/hip_kernels.cmake; an empty file when clang could not build it) in libnccl.so.2, beside
   the CUDA fatbin, so one library file carries the kernels of every backend. */
    .section .rodata
    .balign 64
    .globl accl_hip_bundle_begin
    .hidden accl_hip_bundle_begin
accl_hip_bundle_begin:
    .incbin ACCL_HIP_BUNDLE_PATH
    .globl accl_hip_bundle_end
    .hidden accl_hip_bundle_end
accl_hip_bundle_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
