/* cp.async (sm_80+): global -> shared copies that bypass the registers, for the multi-stage
 * pipelines of the AᵀA kernels (ata_symtile.cu, ata_dmma.cu). `valid` false copies nothing and
 * writes zeros (src-size 0), so a tile's edge past the matrix needs no branch around the copy;
 * the source pointer must still be a mapped address. */
#ifndef CRUNCHD_CP_ASYNC_CUH
#define CRUNCHD_CP_ASYNC_CUH

/* BYTES 16: .cg (L2 only); 4 or 8: .ca */
template <int BYTES> __device__ __forceinline__ void cp_async(void *smem, const void *gmem, bool valid)
{
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    int src_bytes = valid ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(BYTES),
                     "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* until at most N committed groups are still in flight */
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#endif
