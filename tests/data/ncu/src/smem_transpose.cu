// Tiled transpose through shared memory WITHOUT padding: the column reads of the tile hit one
// bank (32-way conflicts), so the SourceCounters/MemoryWorkloadAnalysis fixtures show them.
// Build: nvcc -O3 -lineinfo -arch=sm_90 smem_transpose.cu -o smem_transpose
#include <cstdio>
#include <cuda_runtime.h>

constexpr int TILE = 32;

__global__ void transpose_smem(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < n && y < n) tile[threadIdx.y][threadIdx.x] = in[(long)y * n + x];
    __syncthreads();
    int tx = blockIdx.y * TILE + threadIdx.x;
    int ty = blockIdx.x * TILE + threadIdx.y;
    if (tx < n && ty < n) out[(long)ty * n + tx] = tile[threadIdx.x][threadIdx.y];
}

int main() {
    const int n = 4096;
    float *in = nullptr, *out = nullptr;
    cudaMalloc(&in, sizeof(float) * n * n);
    cudaMalloc(&out, sizeof(float) * n * n);
    cudaMemset(in, 0, sizeof(float) * n * n);
    dim3 block(TILE, TILE), grid(n / TILE, n / TILE);
    for (int i = 0; i < 3; ++i) transpose_smem<<<grid, block>>>(in, out, n);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("transpose: %s\n", cudaGetErrorString(err));
    cudaFree(in);
    cudaFree(out);
    return err == cudaSuccess ? 0 : 1;
}
