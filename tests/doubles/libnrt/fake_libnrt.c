/* Contract double of libnrt.so.1: the functions the grader binds, with the prototypes of
 * nrt.h / nrt_experimental.h (aws-neuron-sdk src/libnrt/include/nrt). Loaded into a Python
 * process with ctypes, each call takes the GIL and forwards to libnrt_device.py, which holds
 * the runtime's state and computes real outputs. LIBNRT_DEVICE_DIR is set at build time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NRT_TENSOR_NAME_MAX 256
typedef int NRT_STATUS;
typedef struct nrt_tensor_info {
    char name[NRT_TENSOR_NAME_MAX];
    int usage;
    size_t size;
    int dtype;
    uint32_t *shape;
    uint32_t ndim;
} nrt_tensor_info_t;
typedef struct nrt_tensor_info_array {
    uint64_t tensor_count;
    nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;

static PyObject *device_module(void) {
    static PyObject *module = NULL;
    if (module == NULL) {
        PyObject *path = PySys_GetObject("path");
        PyObject *dir = PyUnicode_FromString(LIBNRT_DEVICE_DIR);
        PyList_Insert(path, 0, dir);
        Py_DECREF(dir);
        module = PyImport_ImportModule("libnrt_device");
        if (module == NULL) { PyErr_Print(); }
    }
    return module;
}

/* Call libnrt_device.<name>(args...) and return its result (new reference) or NULL. */
static PyObject *call(const char *name, const char *fmt, ...) {
    PyObject *module = device_module();
    if (module == NULL) return NULL;
    PyObject *fn = PyObject_GetAttrString(module, name);
    if (fn == NULL) { PyErr_Print(); return NULL; }
    va_list va;
    va_start(va, fmt);
    PyObject *args = Py_VaBuildValue(fmt, va);
    va_end(va);
    PyObject *result = args ? PyObject_CallObject(fn, args) : NULL;
    Py_XDECREF(args);
    Py_DECREF(fn);
    if (result == NULL) PyErr_Print();
    return result;
}

static NRT_STATUS status_of(PyObject *r) {
    NRT_STATUS s = r ? (NRT_STATUS)PyLong_AsLong(r) : 1;
    Py_XDECREF(r);
    return s;
}

/* (status, handle) results */
static NRT_STATUS status_and_handle(PyObject *r, void **out) {
    NRT_STATUS s = 1;
    if (r && PyTuple_Check(r)) {
        s = (NRT_STATUS)PyLong_AsLong(PyTuple_GetItem(r, 0));
        if (s == 0 && out) *out = (void *)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 1));
    }
    Py_XDECREF(r);
    return s;
}

#define H(p) ((unsigned long long)(uintptr_t)(p))

/* a (status, count) answer of the device double's `name` */
static NRT_STATUS vnc_count_of(const char *name, uint32_t *vnc_count) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call(name, "()");
    NRT_STATUS s = 1;
    if (r && PyTuple_Check(r)) {
        s = (NRT_STATUS)PyLong_AsLong(PyTuple_GetItem(r, 0));
        if (s == 0) *vnc_count = (uint32_t)PyLong_AsLong(PyTuple_GetItem(r, 1));
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_get_total_vnc_count(uint32_t *vnc_count) { return vnc_count_of("total_vnc_count", vnc_count); }

NRT_STATUS nrt_get_visible_vnc_count(uint32_t *vnc_count) { return vnc_count_of("visible_vnc_count", vnc_count); }

/* nrt_instance_info_t of nrt.h: family, size, arch_name[16], device_revision[8]; a caller passes
 * the length it knows, and gets that much filled (an older, shorter struct: family and size). */
typedef struct nrt_instance_info {
    uint32_t family;
    uint32_t size;
    char arch_name[16];
    char device_revision[8];
} nrt_instance_info_t;

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t *info, size_t instance_info_len) {
    if (info == NULL || instance_info_len < 2 * sizeof(uint32_t)) return 2;      /* NRT_INVALID */
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call("instance_info", "()");
    NRT_STATUS s = 1;
    if (r && PyTuple_Check(r)) {
        s = (NRT_STATUS)PyLong_AsLong(PyTuple_GetItem(r, 0));
        if (s == 0) {
            nrt_instance_info_t full;
            memset(&full, 0, sizeof(full));
            full.family = (uint32_t)PyLong_AsLong(PyTuple_GetItem(r, 1));
            full.size = (uint32_t)PyLong_AsLong(PyTuple_GetItem(r, 2));
            strncpy(full.arch_name, PyUnicode_AsUTF8(PyTuple_GetItem(r, 3)), sizeof(full.arch_name) - 1);
            memcpy(info, &full, instance_info_len < sizeof(full) ? instance_info_len : sizeof(full));
        }
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_init(int framework, const char *fw_version, const char *fal_version) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_of(call("init", "(i)", framework));
    PyGILState_Release(g);
    return s;
}

void nrt_close(void) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(call("close", "()"));
    PyGILState_Release(g);
}

NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, void **model) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_and_handle(call("load", "(y#ii)", (const char *)neff_bytes, (Py_ssize_t)size, vnc,
                                          vnc_count), model);
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_unload(void *model) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_of(call("unload", "(K)", H(model)));
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_get_model_tensor_info(void *model, nrt_tensor_info_array_t **tensor_info) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call("tensor_info", "(K)", H(model));
    NRT_STATUS s = 1;
    if (r && PyTuple_Check(r)) {
        s = (NRT_STATUS)PyLong_AsLong(PyTuple_GetItem(r, 0));
        PyObject *list = PyTuple_GetItem(r, 1);
        if (s == 0) {
            Py_ssize_t n = PyList_Size(list);
            nrt_tensor_info_array_t *a = calloc(1, sizeof(nrt_tensor_info_array_t) + n * sizeof(nrt_tensor_info_t));
            a->tensor_count = (uint64_t)n;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *e = PyList_GetItem(list, i);
                nrt_tensor_info_t *t = &a->tensor_array[i];
                strncpy(t->name, PyUnicode_AsUTF8(PyTuple_GetItem(e, 0)), NRT_TENSOR_NAME_MAX - 1);
                t->usage = (int)PyLong_AsLong(PyTuple_GetItem(e, 1));
                t->size = (size_t)PyLong_AsSize_t(PyTuple_GetItem(e, 2));
                t->dtype = (int)PyLong_AsLong(PyTuple_GetItem(e, 3));
                PyObject *shape = PyTuple_GetItem(e, 4);
                t->ndim = (uint32_t)PyList_Size(shape);
                t->shape = calloc(t->ndim ? t->ndim : 1, sizeof(uint32_t));
                for (uint32_t d = 0; d < t->ndim; d++) t->shape[d] = (uint32_t)PyLong_AsLong(PyList_GetItem(shape, d));
            }
            *tensor_info = a;
        }
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t *tensor_info) {
    if (tensor_info == NULL) return 2;
    for (uint64_t i = 0; i < tensor_info->tensor_count; i++) free(tensor_info->tensor_array[i].shape);
    free(tensor_info);
    return 0;
}

NRT_STATUS nrt_tensor_allocate(int placement, int vnc, size_t size, const char *name, void **tensor) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_and_handle(call("tensor_allocate", "(iinz)", placement, vnc, (Py_ssize_t)size, name),
                                     tensor);
    PyGILState_Release(g);
    return s;
}

void nrt_tensor_free(void **tensor) {
    if (tensor == NULL || *tensor == NULL) return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(call("tensor_free", "(K)", H(*tensor)));
    *tensor = NULL;
    PyGILState_Release(g);
}

NRT_STATUS nrt_tensor_write(void *tensor, const void *buf, size_t offset, size_t size) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_of(call("tensor_write", "(Ky#n)", H(tensor), (const char *)buf, (Py_ssize_t)size,
                                  (Py_ssize_t)offset));
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_tensor_read(const void *tensor, void *buf, size_t offset, size_t size) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call("tensor_read", "(Knn)", H(tensor), (Py_ssize_t)offset, (Py_ssize_t)size);
    NRT_STATUS s = 1;
    if (r && PyTuple_Check(r)) {
        s = (NRT_STATUS)PyLong_AsLong(PyTuple_GetItem(r, 0));
        if (s == 0) memcpy(buf, PyBytes_AsString(PyTuple_GetItem(r, 1)), size);
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_allocate_tensor_set(void **result) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_and_handle(call("set_allocate", "()"), result);
    PyGILState_Release(g);
    return s;
}

void nrt_destroy_tensor_set(void **tensor_set) {
    if (tensor_set == NULL || *tensor_set == NULL) return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(call("set_destroy", "(K)", H(*tensor_set)));
    *tensor_set = NULL;
    PyGILState_Release(g);
}

NRT_STATUS nrt_add_tensor_to_tensor_set(void *tensor_set, const char *tensor_name, void *tensor) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_of(call("set_add", "(KsK)", H(tensor_set), tensor_name, H(tensor)));
    PyGILState_Release(g);
    return s;
}

NRT_STATUS nrt_execute(void *model, const void *input_set, void *output_set) {
    PyGILState_STATE g = PyGILState_Ensure();
    NRT_STATUS s = status_of(call("execute", "(KKK)", H(model), H(input_set), H(output_set)));
    PyGILState_Release(g);
    return s;
}
