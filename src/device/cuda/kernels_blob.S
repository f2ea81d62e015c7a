/* kernels_blob.S: embeds the CUDA kernels' fatbin (ACCL_CUDA_FATBIN_PATH, set by CMake; an
   empty file when nvcc was not found) in libnccl.so.2, so the library needs no file beside it. */
    .section .rodata
    .balign 64
    .globl accl_cuda_fatbin_begin
    .hidden accl_cuda_fatbin_begin
accl_cuda_fatbin_begin:
    .incbin ACCL_CUDA_FATBIN_PATH
    .globl accl_cuda_fatbin_end
    .hidden accl_cuda_fatbin_end
accl_cuda_fatbin_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
