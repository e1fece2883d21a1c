/*
 * A tiny fake libnvidia-ml.so.1 for contract tests of the real nvidia-ml-py bindings (no GPU needed).
 * Compiled by tests/test_gpu_contract.py with gcc against the official nvml.h (PyPI nvidia-nvml-dev),
 * so struct layouts, versioned structs, the INSUFFICIENT_SIZE protocol and error codes are the
 * driver's. Two GPUs. FAKE_NVML_MODE (read at each call) selects a failure:
 *   ok | driver_not_loaded | mismatch | no_permission  (nvmlInitWithFlags)
 *   gpu_lost (GPU 1 readings) | unknown (every device call)
 * FAKE_NVML_XID="<index>:<xid>" makes nvmlEventSetWait_v2 deliver that event once.
 * -DOLD_DRIVER leaves out the newer symbols (memory v2, TemperatureV, ClocksEventReasons,
 * processes v3) and provides the older ones, as a pre-535 driver does.
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nvmlDevice_st { int index; };
struct nvmlEventSet_st { int registered[2]; };
static struct nvmlDevice_st devices[2] = {{0}, {1}};
static struct nvmlEventSet_st event_set;
static int initialized = 0;
static int xid_delivered = 0;

static int mode(const char *m) {
    const char *v = getenv("FAKE_NVML_MODE");
    return v != NULL && strcmp(v, m) == 0;
}

static nvmlReturn_t dev_check(nvmlDevice_t d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (d == NULL || (d != &devices[0] && d != &devices[1])) return NVML_ERROR_INVALID_ARGUMENT;
    if (mode("unknown")) return NVML_ERROR_UNKNOWN;
    if (mode("gpu_lost") && d->index == 1) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}
#define CHECK(d) do { nvmlReturn_t r_ = dev_check(d); if (r_ != NVML_SUCCESS) return r_; } while (0)

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (mode("driver_not_loaded")) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (mode("mismatch")) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    if (mode("no_permission")) return NVML_ERROR_NO_PERMISSION;
    initialized = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { initialized = 0; return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Fake NVML error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (length < 16) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", "535.183.01");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    *v = 12020;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (mode("unknown")) return NVML_ERROR_UNKNOWN;
    *count = 2;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= 2) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (d != &devices[0] && d != &devices[1]) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(uuid, length, "GPU-fa4e0000-0000-0000-0000-00000000000%d", d->index);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    snprintf(name, length, "%s", d->index == 0 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA L4");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    CHECK(d);
    if (d->index == 1) return NVML_ERROR_NOT_SUPPORTED;  /* an L4 has no MIG */
    *current = *pending = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    CHECK(d);
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    m->total = 85899345920ULL;
    m->reserved = 536870912ULL;
    m->used = 64424509440ULL;
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}
#endif
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    CHECK(d);
    m->total = 85899345920ULL;
    m->used = 64424509440ULL + 536870912ULL;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    CHECK(d);
    u->gpu = 93;
    u->memory = 37;
    return NVML_SUCCESS;
}

static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    CHECK(d);
    if (d->index == 1) { *count = 0; return NVML_SUCCESS; }
    if (infos == NULL || *count < 2) { *count = 2; return NVML_ERROR_INSUFFICIENT_SIZE; }
    *count = 2;
    for (unsigned int i = 0; i < 2; i++) {
        infos[i].pid = 1000 + i;
        infos[i].usedGpuMemory = (i + 1) * 1073741824ULL;
        infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    return NVML_SUCCESS;
}
#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p) {
    return processes(d, c, p);
}
#else
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *p) {
    return processes(d, c, p);
}
#endif

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *clock) {
    CHECK(d);
    if (type == NVML_CLOCK_SM) *clock = 1410;
    else if (type == NVML_CLOCK_MEM) *clock = 1593;
    else return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *power) {
    CHECK(d);
    *power = 250500;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *limit) {
    CHECK(d);
    *limit = 400000;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy) {
    CHECK(d);
    if (d->index == 1) return NVML_ERROR_NOT_SUPPORTED;
    *energy = 987654321ULL;
    return NVML_SUCCESS;
}
#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_t *t) {
    CHECK(d);
    if (t->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (t->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    t->temperature = 55;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons) {
    CHECK(d);
    *reasons = nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksEventReasonGpuIdle;
    return NVML_SUCCESS;
}
#else
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t s, unsigned int *temp) {
    CHECK(d);
    if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 55;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons) {
    CHECK(d);
    *reasons = nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksEventReasonGpuIdle;
    return NVML_SUCCESS;
}
#endif
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t e, nvmlEccCounterType_t c,
                                         unsigned long long *count) {
    CHECK(d);
    if (c != NVML_VOLATILE_ECC && c != NVML_AGGREGATE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
    *count = e == NVML_MEMORY_ERROR_TYPE_CORRECTED ? 7 : 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    CHECK(d);
    *corr = 4; *unc = 1; *pending = 1; *failure = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    memset(&event_set, 0, sizeof event_set);
    *set = &event_set;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    CHECK(d);
    if (types & nvmlEventTypeXidCriticalError) set->registered[d->index] = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    const char *spec = getenv("FAKE_NVML_XID");
    int index, xid;
    if (!xid_delivered && spec != NULL && sscanf(spec, "%d:%d", &index, &xid) == 2 && index >= 0 && index < 2
        && set->registered[index]) {
        xid_delivered = 1;
        data->device = &devices[index];
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = (unsigned long long)xid;
        data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
        return NVML_SUCCESS;
    }
    usleep((timeoutms < 20 ? timeoutms : 20) * 1000);
    return NVML_ERROR_TIMEOUT;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) { (void)set; return NVML_SUCCESS; }
