/* Integer columns of one SQLite query straight into int64 buffers (launchtui/trace/native_columns.py).
 *
 * No build-time SQLite: the few sqlite3 functions used are declared here and resolved at run time
 * (dlopen/dlsym) from the very library Python's sqlite3 module uses, so this compiles with gcc and
 * the Python headers alone. No numpy headers either: the output arrays come in through the buffer
 * protocol. The scan runs without the GIL, on its own connection, so two tables read in parallel.
 *
 * scan() only ever reads integers and NULLs: at any other value (text, REAL, blob) or any SQLite
 * error it stops and says so, and the caller reads the table with the pure-Python path, which
 * defines the semantics of those cases (its errors and messages included).
 *
 * A packed output holds two columns as `hi << shift | lo`, formed here and not in SQL (where an
 * overflow turns the integer into a REAL and ids past the shift mis-split silently): only when
 * 0 <= hi < 2^(63 - shift) and 0 <= lo < 2^shift, which makes the split exact. Any other pair (a
 * NULL, a negative or large id) stops the scan as UNPACKABLE and the caller reads the two apart.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef struct sqlite3_value sqlite3_value;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_NULL 5
#define SQLITE_OPEN_READWRITE 0x00000002
#define SQLITE_OPEN_CREATE 0x00000004
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000

#define MAX_COLS 64

/* scan() outcomes besides OK; the caller falls back to the pure-Python reader on each */
enum { SCAN_OK = 0, SCAN_ODD_VALUE = 1, SCAN_FULL = 2, SCAN_SQLITE_ERROR = 3, SCAN_UNPACKABLE = 4 };

static int (*p_open_v2)(const char *, sqlite3 **, int, const char *);
static int (*p_close)(sqlite3 *);
static int (*p_prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
static int (*p_step)(sqlite3_stmt *);
static int (*p_column_count)(sqlite3_stmt *);
static sqlite3_value *(*p_column_value)(sqlite3_stmt *, int);
static int (*p_value_type)(sqlite3_value *);
static int64_t (*p_value_int64)(sqlite3_value *);
static int (*p_finalize)(sqlite3_stmt *);
static const char *(*p_errmsg)(sqlite3 *);
static int (*p_busy_timeout)(sqlite3 *, int);
static void *lib_handle;

static PyObject *scan_load(PyObject *self, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path)
        return NULL;
    if (lib_handle)
        Py_RETURN_TRUE;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        Py_RETURN_FALSE;
    struct { void **slot; const char *name; } syms[] = {
        {(void **)&p_open_v2, "sqlite3_open_v2"}, {(void **)&p_close, "sqlite3_close"},
        {(void **)&p_prepare_v2, "sqlite3_prepare_v2"}, {(void **)&p_step, "sqlite3_step"},
        {(void **)&p_column_count, "sqlite3_column_count"}, {(void **)&p_column_value, "sqlite3_column_value"},
        {(void **)&p_value_type, "sqlite3_value_type"}, {(void **)&p_value_int64, "sqlite3_value_int64"},
        {(void **)&p_finalize, "sqlite3_finalize"},
        {(void **)&p_errmsg, "sqlite3_errmsg"}, {(void **)&p_busy_timeout, "sqlite3_busy_timeout"},
    };
    void *found[sizeof syms / sizeof syms[0]];
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        found[i] = dlsym(h, syms[i].name);
        if (!found[i]) {          /* all or nothing: a partial set is never installed */
            dlclose(h);
            Py_RETURN_FALSE;
        }
    }
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        *syms[i].slot = found[i];
    lib_handle = h;
    Py_RETURN_TRUE;
}

static PyObject *scan_loaded(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(lib_handle != NULL);
}

/* scan(uri, sql, outs, required, null_value[, packs]) -> (status, rows, dropped, message)
 * Runs `sql` on a fresh connection to `uri` (opened with the flags Python's sqlite3.connect uses for
 * a URI, so mode=ro&immutable=1 means the same). Column c of each row goes to outs[c]; NULL becomes
 * null_value, except where required[c]: there the row is skipped whole and counted in `dropped`.
 * packs[c], when given and not None, is (j, shift): outs[c] gets column c << shift | column j, where
 * j >= len(outs) is one of the query's extra columns (see the header comment). */
static PyObject *scan_scan(PyObject *self, PyObject *args)
{
    const char *uri, *sql;
    PyObject *outs, *required_obj, *packs_obj = Py_None;
    long long null_value;
    if (!PyArg_ParseTuple(args, "ssOOL|O", &uri, &sql, &outs, &required_obj, &null_value, &packs_obj))
        return NULL;
    if (!lib_handle) {
        PyErr_SetString(PyExc_RuntimeError, "libsqlite3 not loaded");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(outs, "outs must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    Py_buffer views[MAX_COLS];
    char required[MAX_COLS];
    int64_t *dst[MAX_COLS];
    int pack_col[MAX_COLS], pack_shift[MAX_COLS], ncols = (int)k;
    Py_ssize_t cap = PY_SSIZE_T_MAX, got = 0;
    if (k < 1 || k > MAX_COLS || PySequence_Size(required_obj) != k ||
        (packs_obj != Py_None && PySequence_Size(packs_obj) != k)) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "1 to 64 output columns, one required flag (and pack) each");
        return NULL;
    }
    for (Py_ssize_t c = 0; c < k; c++) {
        pack_col[c] = -1;
        pack_shift[c] = 0;
        if (packs_obj == Py_None)
            continue;
        PyObject *p = PySequence_GetItem(packs_obj, c);
        if (!p) {
            Py_DECREF(seq);
            return NULL;
        }
        int ok = p == Py_None || PyArg_ParseTuple(p, "ii", &pack_col[c], &pack_shift[c]);
        Py_DECREF(p);
        if (ok && p != Py_None && (pack_col[c] < k || pack_col[c] >= MAX_COLS || pack_shift[c] < 1 || pack_shift[c] > 62)) {
            PyErr_SetString(PyExc_ValueError, "a pack is (extra column >= len(outs), shift 1..62)");
            ok = 0;
        }
        if (!ok) {
            Py_DECREF(seq);
            return NULL;
        }
        if (pack_col[c] >= ncols)
            ncols = pack_col[c] + 1;
    }
    for (Py_ssize_t c = 0; c < k; c++) {
        PyObject *flag = PySequence_GetItem(required_obj, c);
        int truth = flag ? PyObject_IsTrue(flag) : -1;
        Py_XDECREF(flag);
        if (truth < 0)
            goto release;
        required[c] = (char)truth;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, c), &views[c], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto release;
        got++;
        if (views[c].len % 8 != 0) {   /* the caller passes int64 arrays */
            PyErr_SetString(PyExc_ValueError, "outputs must be int64 buffers");
            goto release;
        }
        dst[c] = (int64_t *)views[c].buf;
        if (views[c].len / 8 < cap)
            cap = views[c].len / 8;
    }

    int status = SCAN_OK, rc;
    Py_ssize_t n = 0, dropped = 0;
    char message[256] = "";
    Py_BEGIN_ALLOW_THREADS
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t row[MAX_COLS];
    char isnull[MAX_COLS];
    /* NOMUTEX: this connection lives on this thread only, so the per-call connection mutex (two
       lock/unlock pairs per value in a serialized build) is saved */
    rc = p_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    /* the wait Python's sqlite3.connect sets (timeout=5.0): a snapshot opened mode=rw is in WAL
       mode, and connections opening it at once meet each other's locks (SQLITE_BUSY) */
    if (rc == SQLITE_OK)
        rc = p_busy_timeout(db, 5000);
    if (rc == SQLITE_OK)
        rc = p_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && p_column_count(st) != ncols) {
        status = SCAN_SQLITE_ERROR;
        snprintf(message, sizeof message, "query has %d columns, %d expected", p_column_count(st), ncols);
    } else if (rc != SQLITE_OK) {
        status = SCAN_SQLITE_ERROR;
    } else {
        while ((rc = p_step(st)) == SQLITE_ROW) {
            int skip = 0;
            /* every column is checked even in a row to be dropped: an odd value anywhere sends the
               whole table to the fallback, as it would fail or parse there */
            for (int c = 0; c < ncols; c++) {
                /* one column_value, then its type and integer (a column_type + column_int64
                   pair looks the column up twice). The value is "unprotected", which only
                   matters with a connection mutex: this NOMUTEX connection has none */
                sqlite3_value *v = p_column_value(st, c);
                int t = p_value_type(v);
                isnull[c] = t == SQLITE_NULL;
                if (t == SQLITE_INTEGER)
                    row[c] = p_value_int64(v);
                else if (t == SQLITE_NULL) {
                    row[c] = null_value;
                    skip |= c < k && required[c];
                } else {
                    status = SCAN_ODD_VALUE;
                    break;
                }
            }
            if (status != SCAN_OK)
                break;
            for (int c = 0; c < k && !skip; c++) {
                if (pack_col[c] < 0)
                    continue;
                int64_t hi = row[c], lo = row[pack_col[c]];
                if (isnull[c] || isnull[pack_col[c]] || hi < 0 || lo < 0 ||
                    hi > (INT64_MAX >> pack_shift[c]) || lo >= ((int64_t)1 << pack_shift[c])) {
                    status = SCAN_UNPACKABLE;
                    break;
                }
                row[c] = (hi << pack_shift[c]) | lo;
            }
            if (status != SCAN_OK)
                break;
            if (skip) {
                dropped++;
                continue;
            }
            if (n >= cap) {
                status = SCAN_FULL;
                break;
            }
            for (int c = 0; c < k; c++)
                dst[c][n] = row[c];
            n++;
        }
        if (status == SCAN_OK && rc != SQLITE_DONE)
            status = SCAN_SQLITE_ERROR;
    }
    if (status == SCAN_SQLITE_ERROR && !message[0])
        snprintf(message, sizeof message, "%s", db ? p_errmsg(db) : "cannot open");
    if (st)
        p_finalize(st);
    if (db)
        p_close(db);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < got; c++)
        PyBuffer_Release(&views[c]);
    Py_DECREF(seq);
    return Py_BuildValue("innN", status, n, dropped, PyUnicode_DecodeUTF8(message, strlen(message), "replace"));

release:
    for (Py_ssize_t c = 0; c < got; c++)
        PyBuffer_Release(&views[c]);
    Py_DECREF(seq);
    return NULL;
}

static PyMethodDef methods[] = {
    {"load", scan_load, METH_O, "load(path) -> bool: resolve the sqlite3 functions from this library (once)"},
    {"loaded", scan_loaded, METH_NOARGS, "loaded() -> bool"},
    {"scan", scan_scan, METH_VARARGS, "scan(uri, sql, outs, required, null_value) -> (status, rows, dropped, message)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_scan(void)
{
    return PyModule_Create(&module);
}
