/* np.searchsorted for int64 keys that mostly come in ascending order (launchtui/trace/sorted_search.py).
 *
 * The analyses search sorted keys in sorted times: gap starts in op starts, gap ends in launch
 * calls, iteration bounds in ranges. numpy bisects the whole array for every key (log2 n probes,
 * each a mispredicted branch); here each key in order starts from the previous key's answer and
 * gallops forward (probes at +1, +2, +4, ... then a bisection inside the last step), so a key costs
 * log2 of the distance it moves, ~1-3 probes where the keys are as dense as the array.
 *
 * The answer is numpy's for any key order: a key below the previous one is bisected in the part
 * already known to hold it, [0, previous answer]. `a` must be sorted, as numpy requires. The loop
 * runs without the GIL. No numpy headers: the arrays come in through the buffer protocol, int64
 * and C-contiguous (the Python side checks the dtypes and sends anything else to numpy).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* the first k in [lo, hi) whose a[k] is not before x (before: a[k] < x, or a[k] <= x for the right
 * side); every k < lo is before x and every k >= hi is not */
static inline Py_ssize_t bisect(const int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int64_t x, int right)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + ((hi - lo) >> 1);
        int before = right ? (a[mid] <= x) : (a[mid] < x);
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void search_keys(const int64_t *a, Py_ssize_t n, const int64_t *v, Py_ssize_t m, int64_t *out,
                        int right)
{
    Py_ssize_t at = 0;     /* the previous key's answer */
    int64_t previous = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t x = v[i];
        Py_ssize_t lo = 0, hi = n;
        if (i > 0 && x >= previous) {
            /* every a[k], k < at, is before the previous key and so before x */
            Py_ssize_t probe = at, step = 1;
            lo = at;
            while (probe < n) {
                int before = right ? (a[probe] <= x) : (a[probe] < x);
                if (!before) {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                probe = lo + step;
                step <<= 1;
            }
        } else if (i > 0) {
            hi = at;       /* every a[k], k >= at, is not before the previous key, nor before x */
        }
        at = bisect(a, lo, hi, x, right);
        out[i] = (int64_t)at;
        previous = x;
    }
}

static int int64_buffer(Py_buffer *b, const char *what)
{
    if (b->itemsize != 8 || b->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "%s: an int64 buffer is needed", what);
        return 0;
    }
    return 1;
}

/* search(a, v, out, right): out[i] = np.searchsorted(a, v[i], side); all three int64, out as long as v */
static PyObject *search(PyObject *self, PyObject *args)
{
    Py_buffer a, v, out;
    int right;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*w*p", &a, &v, &out, &right))
        return NULL;
    if (int64_buffer(&a, "a") && int64_buffer(&v, "v") && int64_buffer(&out, "out")) {
        if (out.len != v.len) {
            PyErr_SetString(PyExc_ValueError, "out: one place per key is needed");
        } else {
            Py_BEGIN_ALLOW_THREADS
            search_keys((const int64_t *)a.buf, a.len / 8, (const int64_t *)v.buf, v.len / 8,
                        (int64_t *)out.buf, right);
            Py_END_ALLOW_THREADS
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&v);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"search", search, METH_VARARGS, "search(a, v, out, right): np.searchsorted of int64 keys into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sorted_search", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sorted_search(void)
{
    return PyModule_Create(&module);
}
