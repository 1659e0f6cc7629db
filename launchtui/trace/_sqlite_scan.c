/* Integer columns of one SQLite query straight into int64 buffers (launchtui/trace/native_columns.py).
 *
 * No build-time SQLite: the few sqlite3 functions used are declared here and resolved at run time
 * (dlopen/dlsym) from the very library Python's sqlite3 module uses, so this compiles with gcc and
 * the Python headers alone. No numpy headers either: the output arrays come in through the buffer
 * protocol. The scan runs without the GIL, on its own connection, so two tables read in parallel.
 *
 * The query is `SELECT launchtui_row(col, ...) FROM ...`: launchtui_row is an aggregate registered
 * on the scan's connection whose step writes one row's values. SQLite then visits every row inside
 * one sqlite3_step, as its own total() does, instead of returning to the caller once per row: the
 * scan costs what the sqlite3 shell's aggregate scan costs (the bench's C floor), ~30 % less CPU
 * than a step and column_value per row. The rows are the query's, in its scan order.
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
typedef struct sqlite3_context sqlite3_context;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_NULL 5
#define SQLITE_OPEN_READWRITE 0x00000002
#define SQLITE_OPEN_CREATE 0x00000004
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000
#define SQLITE_UTF8 1

#define MAX_COLS 64

/* scan() outcomes besides OK; the caller falls back to the pure-Python reader on each */
enum { SCAN_OK = 0, SCAN_ODD_VALUE = 1, SCAN_FULL = 2, SCAN_SQLITE_ERROR = 3, SCAN_UNPACKABLE = 4 };

static int (*p_open_v2)(const char *, sqlite3 **, int, const char *);
static int (*p_close)(sqlite3 *);
static int (*p_prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
static int (*p_step)(sqlite3_stmt *);
static int (*p_value_type)(sqlite3_value *);
static int64_t (*p_value_int64)(sqlite3_value *);
static int (*p_finalize)(sqlite3_stmt *);
static const char *(*p_errmsg)(sqlite3 *);
static int (*p_busy_timeout)(sqlite3 *, int);
static int (*p_create_function_v2)(sqlite3 *, const char *, int, int, void *,
                                   void (*)(sqlite3_context *, int, sqlite3_value **),
                                   void (*)(sqlite3_context *, int, sqlite3_value **),
                                   void (*)(sqlite3_context *), void (*)(void *));
static void *(*p_user_data)(sqlite3_context *);
static void (*p_result_error)(sqlite3_context *, const char *, int);
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
        {(void **)&p_value_type, "sqlite3_value_type"}, {(void **)&p_value_int64, "sqlite3_value_int64"},
        {(void **)&p_finalize, "sqlite3_finalize"},
        {(void **)&p_errmsg, "sqlite3_errmsg"}, {(void **)&p_busy_timeout, "sqlite3_busy_timeout"},
        {(void **)&p_create_function_v2, "sqlite3_create_function_v2"},
        {(void **)&p_user_data, "sqlite3_user_data"}, {(void **)&p_result_error, "sqlite3_result_error"},
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

/* One scan's outputs and outcome, shared with the launchtui_row aggregate through its user data. */
typedef struct {
    int64_t **dst;
    const char *required;
    const int *pack_col, *pack_shift;
    int k, ncols;                       /* outputs; query columns (outputs, then packs' extras) */
    int64_t null_value;
    Py_ssize_t cap, n, dropped;
    int status;
    char message[256];
} Scan;

/* Stops the scan: SQLite ends the statement with an error, and `status` says which. */
static void row_stop(sqlite3_context *ctx, Scan *sc, int status)
{
    sc->status = status;
    p_result_error(ctx, "launchtui scan stopped", -1);
}

/* The aggregate's step: one row's columns into the outputs (a row with a NULL in a required
   column is counted in `dropped`, not written). Runs without the GIL, inside sqlite3_step. */
static void row_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    Scan *sc = (Scan *)p_user_data(ctx);
    int64_t row[MAX_COLS];
    char isnull[MAX_COLS];
    int skip = 0;
    if (sc->status != SCAN_OK)
        return;
    if (argc != sc->ncols) {
        snprintf(sc->message, sizeof sc->message, "query has %d columns, %d expected", argc, sc->ncols);
        row_stop(ctx, sc, SCAN_SQLITE_ERROR);
        return;
    }
    /* every column is checked even in a row to be dropped: an odd value anywhere sends the whole
       table to the fallback, as it would fail or parse there */
    for (int c = 0; c < argc; c++) {
        int t = p_value_type(argv[c]);
        isnull[c] = t == SQLITE_NULL;
        if (t == SQLITE_INTEGER)
            row[c] = p_value_int64(argv[c]);
        else if (t == SQLITE_NULL) {
            row[c] = sc->null_value;
            skip |= c < sc->k && sc->required[c];
        } else {
            row_stop(ctx, sc, SCAN_ODD_VALUE);
            return;
        }
    }
    for (int c = 0; c < sc->k && !skip; c++) {
        int j = sc->pack_col[c], shift = sc->pack_shift[c];
        if (j < 0)
            continue;
        int64_t hi = row[c], lo = row[j];
        if (isnull[c] || isnull[j] || hi < 0 || lo < 0 || hi > (INT64_MAX >> shift) || lo >= ((int64_t)1 << shift)) {
            row_stop(ctx, sc, SCAN_UNPACKABLE);
            return;
        }
        row[c] = (hi << shift) | lo;
    }
    if (skip) {
        sc->dropped++;
        return;
    }
    if (sc->n >= sc->cap) {
        row_stop(ctx, sc, SCAN_FULL);
        return;
    }
    for (int c = 0; c < sc->k; c++)
        sc->dst[c][sc->n] = row[c];
    sc->n++;
}

static void row_final(sqlite3_context *ctx)
{
    (void)ctx;   /* the aggregate's value is unused (NULL): the rows went to the outputs */
}


/* scan(uri, sql, outs, required, null_value[, packs]) -> (status, rows, dropped, message)
 * Runs `sql`, a `SELECT launchtui_row(col, ...) FROM ...` (header comment), on a fresh connection to
 * `uri` (opened with the flags Python's sqlite3.connect uses for a URI, so mode=ro&immutable=1 means
 * the same). Column c of each row goes to outs[c]; NULL becomes
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

    Scan sc = {.dst = dst, .required = required, .pack_col = pack_col, .pack_shift = pack_shift,
               .k = (int)k, .ncols = ncols, .null_value = null_value, .cap = cap, .status = SCAN_OK};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    /* NOMUTEX: this connection lives on this thread only, so the per-call connection mutex (two
       lock/unlock pairs per value in a serialized build) is saved */
    rc = p_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    /* the wait Python's sqlite3.connect sets (timeout=5.0): a snapshot opened mode=rw is in WAL
       mode, and connections opening it at once meet each other's locks (SQLITE_BUSY) */
    if (rc == SQLITE_OK)
        rc = p_busy_timeout(db, 5000);
    if (rc == SQLITE_OK)
        rc = p_create_function_v2(db, "launchtui_row", -1, SQLITE_UTF8, &sc, NULL, row_step, row_final, NULL);
    if (rc == SQLITE_OK)
        rc = p_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) {
        sc.status = SCAN_SQLITE_ERROR;
    } else {
        while ((rc = p_step(st)) == SQLITE_ROW)   /* the aggregate's one row: every row was stepped */
            ;
        if (sc.status == SCAN_OK && rc != SQLITE_DONE)
            sc.status = SCAN_SQLITE_ERROR;
    }
    if (sc.status == SCAN_SQLITE_ERROR && !sc.message[0])
        snprintf(sc.message, sizeof sc.message, "%s", db ? p_errmsg(db) : "cannot open");
    if (st)
        p_finalize(st);
    if (db)
        p_close(db);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < got; c++)
        PyBuffer_Release(&views[c]);
    Py_DECREF(seq);
    return Py_BuildValue("innN", sc.status, sc.n, sc.dropped,
                         PyUnicode_DecodeUTF8(sc.message, strlen(sc.message), "replace"));

release:
    for (Py_ssize_t c = 0; c < got; c++)
        PyBuffer_Release(&views[c]);
    Py_DECREF(seq);
    return NULL;
}

static PyMethodDef methods[] = {
    {"load", scan_load, METH_O, "load(path) -> bool: resolve the sqlite3 functions from this library (once)"},
    {"loaded", scan_loaded, METH_NOARGS, "loaded() -> bool"},
    {"scan", scan_scan, METH_VARARGS, "scan(uri, sql, outs, required, null_value[, packs]) -> (status, rows, dropped, message)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sqlite_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sqlite_scan(void)
{
    return PyModule_Create(&module);
}
