// Many kernels and launches in one small program, for the `ask` fixture multi_kernels.ncu-rep:
// five hand kernels (no library modules, so the report stays small), launched 13 times at
// different sizes, so a report holds several launches of one kernel and kernels of very
// different lengths. Build: nvcc -O3 -lineinfo -arch=sm_90 multi_kernels.cu -o multi_kernels
#include <cstdio>
#include <cuda_runtime.h>

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

__global__ void relu_inplace(float* __restrict__ x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] > 0.f ? x[i] : 0.f;
}

// One partial sum per block through shared memory (a tree reduction).
__global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

// Reads rows, writes columns: every store is strided (uncoalesced).
__global__ void naive_transpose(const float* __restrict__ in, float* __restrict__ out, int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < n && y < n) out[(long)x * n + y] = in[(long)y * n + x];
}

// Compute-heavy per element: a polynomial of 64 fused multiply-adds.
__global__ void poly_eval(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], acc = 0.f;
#pragma unroll
    for (int k = 0; k < 64; ++k) acc = fmaf(acc, v, 1.0f / (k + 1));
    y[i] = acc;
}

static int blocks(int n, int threads) { return (n + threads - 1) / threads; }

int main() {
    const int big = 1 << 24, side = 2048;
    float *a, *b, *c, *part;
    cudaMalloc(&a, sizeof(float) * big);
    cudaMalloc(&b, sizeof(float) * big);
    cudaMalloc(&c, sizeof(float) * big);
    cudaMalloc(&part, sizeof(float) * blocks(big, 256));
    cudaMemset(a, 0, sizeof(float) * big);
    cudaMemset(b, 0, sizeof(float) * big);
    for (int n : {1 << 20, 1 << 22, 1 << 24}) vector_add<<<blocks(n, 256), 256>>>(a, b, c, n);
    for (int n : {1 << 20, 1 << 24}) relu_inplace<<<blocks(n, 256), 256>>>(c, n);
    for (int n : {1 << 18, 1 << 22, 1 << 24}) block_sum<<<blocks(n, 256), 256>>>(c, part, n);
    dim3 tile(32, 8), grid(side / 32, side / 8);
    for (int i = 0; i < 2; ++i) naive_transpose<<<grid, tile>>>(a, b, side);
    for (int n : {1 << 16, 1 << 20, 1 << 22}) poly_eval<<<blocks(n, 128), 128>>>(a, c, n);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("multi_kernels: %s\n", cudaGetErrorString(err));
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(part);
    return err == cudaSuccess ? 0 : 1;
}
