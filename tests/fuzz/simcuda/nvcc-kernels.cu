// The source of corpus/nvcc-*.ptx (nvcc -ptx -arch=sm_90, and -G -arch=sm_80, CUDA 13.0):
// real compiler output for the simulated driver's PTX parser.
extern "C" __global__ void vectorAdd(const float *A, const float *B, float *C, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n)
        C[i] = A[i] + B[i];
}

__device__ float helper(float x) { return x * x + 1.0f; }

extern "C" __global__ void reduce(const float *in, float *out, int n)
{
    __shared__ float buf[256];
    int t = threadIdx.x;
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
        s += helper(in[i]);
    buf[t] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k)
            buf[t] += buf[t + k];
        __syncthreads();
    }
    if (t == 0)
        atomicAdd(out, buf[0]);
}

struct P { double a; int b[3]; };
extern "C" __global__ void structy(P p, double *o) { o[threadIdx.x] = p.a * p.b[threadIdx.x % 3] + __shfl_sync(0xffffffff, p.a, 0); }
