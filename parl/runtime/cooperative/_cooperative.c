/* The cooperative scheduler's hot path in C (parl/runtime/cooperative/batching.py holds the same in Python).
 *
 * Per env step an agent parks once (Parking.predict) and the scheduler, per batch, joins the parked
 * samples (join), hands each agent its row (hand_out) and sums the agents' latency (resumed_sum).
 * join and hand_out accelerate the one definition of a prediction batch, parl/serving/prediction_batch.py
 * (stack_samples for one input and no state, split_replies for one action and no state), and are tested
 * against it (tests/test_prediction_batch.py). Done in Python these cost 0.5-1 us per step against
 * 9-10 us for the whole step of a CartPole agent (docs/performance.md); here they cost a fraction of it.
 * The module is optional: without it (no C compiler when parl was installed, or PARL_NO_EXTENSION=1)
 * batching.py runs the Python twins.
 *
 * Every function here does what its Python twin does, nothing more: anything unusual (a sample that
 * is not an exact ndarray of the spec's dtype and shape, say) is left to the Python path, which converts it
 * or names the problem.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#if PY_VERSION_HEX < 0x030A0000 /* Python 3.9 */
static inline PyObject *Py_NewRef(PyObject *obj) {
    Py_INCREF(obj);
    return obj;
}
static int PyModule_AddObjectRef(PyObject *module, const char *name, PyObject *value) {
    Py_INCREF(value);
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}
#endif

static PyObject *getcurrent;   /* greenlet.getcurrent */
static PyObject *perf_counter; /* time.perf_counter: the clock the Python side reads */
static PyObject *switch_name;  /* "switch" */
static PyObject *outside_error_name; /* "_outside_error" */

/* -- Parking: the parked request of one agent's communicator ------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *dict;
    PyObject *weakreflist;
    PyObject *inputs;   /* the parked sample */
    PyObject *states;   /* its states, or None */
    PyObject *greenlet; /* the agent's greenlet (None until the scheduler starts) */
    PyObject *hub;      /* the scheduler's greenlet */
    PyObject *pending;  /* list: the task's parked requests */
    PyObject *ready;    /* list of (communicator, row): agents whose rows are ready, last first */
    double parked_at;   /* perf_counter() at the last park */
    double resumed_at;  /* perf_counter() when it was last resumed */
} Parking;

static PyTypeObject ParkingType;

static int Parking_traverse(Parking *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->inputs);
    Py_VISIT(self->states);
    Py_VISIT(self->greenlet);
    Py_VISIT(self->hub);
    Py_VISIT(self->pending);
    Py_VISIT(self->ready);
    return 0;
}

static int Parking_clear(Parking *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->inputs);
    Py_CLEAR(self->states);
    Py_CLEAR(self->greenlet);
    Py_CLEAR(self->hub);
    Py_CLEAR(self->pending);
    Py_CLEAR(self->ready);
    return 0;
}

static void Parking_dealloc(Parking *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    Parking_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Parking_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Parking *self = (Parking *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->inputs = PyDict_New();
    if (self->inputs == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->states = Py_NewRef(Py_None);
    self->greenlet = Py_NewRef(Py_None);
    self->hub = Py_NewRef(Py_None);
    self->pending = Py_NewRef(Py_None);
    self->ready = Py_NewRef(Py_None);
    return (PyObject *)self;
}

static int read_clock(double *now) {
    PyObject *t = PyObject_CallNoArgs(perf_counter);
    if (t == NULL) return -1;
    *now = PyFloat_AsDouble(t);
    Py_DECREF(t);
    return (*now == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* predict(inputs, states=None): park until the scheduler's batch holds this agent's row. */
static PyObject *Parking_predict(Parking *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *inputs = nargs > 0 ? args[0] : NULL;
    PyObject *states = nargs > 1 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "predict() takes at most 2 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (inputs == NULL && PyUnicode_CompareWithASCIIString(key, "inputs") == 0) {
            inputs = args[nargs + i];
        } else if (states == NULL && PyUnicode_CompareWithASCIIString(key, "states") == 0) {
            states = args[nargs + i];
        } else {
            PyErr_Format(PyExc_TypeError, "predict() got an unexpected or repeated keyword argument %R", key);
            return NULL;
        }
    }
    if (inputs == NULL) {
        PyErr_SetString(PyExc_TypeError, "predict() missing required argument 'inputs'");
        return NULL;
    }
    if (states == NULL) states = Py_None;

    PyObject *current = PyObject_CallNoArgs(getcurrent);
    if (current == NULL) return NULL;
    Py_DECREF(current); /* only compared: the greenlet stays alive while it runs */
    if (current != self->greenlet) {
        PyObject *error = PyObject_CallMethodNoArgs((PyObject *)self, outside_error_name);
        if (error == NULL) return NULL;
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
        return NULL;
    }
    if (!PyList_Check(self->pending) || !PyList_Check(self->ready)) {
        PyErr_SetString(PyExc_RuntimeError, "a Parking request is not attached to a scheduler");
        return NULL;
    }
    /* Park: queue this request, hand over to the next agent whose row is ready (or, with none left, to
     * the scheduler); one clock reading is this request's park time and that agent's resume time.
     * Nothing changes unless every step that can fail has succeeded. */
    double now;
    if (read_clock(&now) < 0) return NULL;
    if (PyList_Append(self->pending, (PyObject *)self) < 0) return NULL;
    PyObject *callargs[2];
    size_t ncallargs;
    Py_ssize_t nready = PyList_GET_SIZE(self->ready);
    if (nready > 0) {
        PyObject *item = PyList_GET_ITEM(self->ready, nready - 1);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyObject_TypeCheck(PyTuple_GET_ITEM(item, 0), &ParkingType)) {
            PyErr_SetString(PyExc_TypeError, "a ready entry is not a (Parking, row) pair");
            goto unqueue;
        }
        Parking *following = (Parking *)PyTuple_GET_ITEM(item, 0);
        callargs[0] = Py_NewRef(following->greenlet);
        callargs[1] = Py_NewRef(PyTuple_GET_ITEM(item, 1));
        ncallargs = 2;
        following->resumed_at = now;
        if (PyList_SetSlice(self->ready, nready - 1, nready, NULL) < 0) { /* drops item */
            Py_DECREF(callargs[0]);
            Py_DECREF(callargs[1]);
            goto unqueue;
        }
    } else {
        callargs[0] = Py_NewRef(self->hub);
        callargs[1] = NULL;
        ncallargs = 1;
    }
    Py_SETREF(self->inputs, Py_NewRef(inputs));
    Py_SETREF(self->states, Py_NewRef(states));
    self->parked_at = now;
    PyObject *row = PyObject_VectorcallMethod(switch_name, callargs, ncallargs | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(callargs[0]);
    Py_XDECREF(callargs[1]);
    return row; /* whoever resumed us handed over our row (or threw an error in) */

unqueue: /* leave pending as it was */
    {
        Py_ssize_t npending = PyList_GET_SIZE(self->pending);
        if (npending > 0 && PyList_GET_ITEM(self->pending, npending - 1) == (PyObject *)self) {
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyList_SetSlice(self->pending, npending - 1, npending, NULL);
            PyErr_Restore(type, value, traceback);
        }
    }
    return NULL;
}

static PyMethodDef Parking_methods[] = {
    {"predict", (PyCFunction)(void (*)(void))Parking_predict, METH_FASTCALL | METH_KEYWORDS,
     "predict($self, inputs, states=None)\n--\n\n"
     "Actions and next states for one sample: parks the calling agent until its row is ready."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Parking_members[] = {
    {"_inputs", T_OBJECT_EX, offsetof(Parking, inputs), 0, NULL},
    {"_states", T_OBJECT_EX, offsetof(Parking, states), 0, NULL},
    {"_greenlet", T_OBJECT_EX, offsetof(Parking, greenlet), 0, NULL},
    {"_hub", T_OBJECT_EX, offsetof(Parking, hub), 0, NULL},
    {"_pending", T_OBJECT_EX, offsetof(Parking, pending), 0, NULL},
    {"_ready", T_OBJECT_EX, offsetof(Parking, ready), 0, NULL},
    {"_parked_at", T_DOUBLE, offsetof(Parking, parked_at), 0, NULL},
    {"_resumed_at", T_DOUBLE, offsetof(Parking, resumed_at), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ParkingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parl.runtime.cooperative._cooperative.Parking",
    .tp_doc = "One agent's parked prediction request; the base of CooperativeCommunicator.",
    .tp_basicsize = sizeof(Parking),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = Parking_new,
    .tp_dealloc = (destructor)Parking_dealloc,
    .tp_traverse = (traverseproc)Parking_traverse,
    .tp_clear = (inquiry)Parking_clear,
    .tp_methods = Parking_methods,
    .tp_members = Parking_members,
    .tp_dictoffset = offsetof(Parking, dict),
    .tp_weaklistoffset = offsetof(Parking, weakreflist),
};

/* -- the scheduler's side, per batch --------------------------------------------------------- */

static int check_batch(PyObject *batch) {
    if (!PyList_CheckExact(batch)) {
        PyErr_Format(PyExc_TypeError, "batch must be a list, got %.100s", Py_TYPE(batch)->tp_name);
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(batch);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyObject_TypeCheck(PyList_GET_ITEM(batch, i), &ParkingType)) {
            PyErr_Format(PyExc_TypeError, "batch[%zd] is not a Parking request", i);
            return -1;
        }
    }
    return 0;
}

/* The parked sample's array under `name` when it is an exact C-contiguous ndarray of `dtype` and
 * `shape` and the request has no states and no other input; NULL otherwise (no error set). */
static PyArrayObject *fitting_sample(Parking *request, PyObject *name, PyArray_Descr *dtype, int ndim,
                                     const npy_intp *shape) {
    PyObject *inputs = request->inputs;
    if (request->states != Py_None || !PyDict_CheckExact(inputs) || PyDict_GET_SIZE(inputs) != 1) return NULL;
    PyObject *value = PyDict_GetItemWithError(inputs, name);
    if (value == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyArray_CheckExact(value)) return NULL;
    PyArrayObject *array = (PyArrayObject *)value;
    if (PyArray_DESCR(array) != dtype || PyArray_NDIM(array) != ndim || !PyArray_IS_C_CONTIGUOUS(array)) return NULL;
    const npy_intp *dims = PyArray_DIMS(array);
    for (int k = 0; k < ndim; k++) {
        if (dims[k] != shape[k]) return NULL;
    }
    return array;
}

static PyObject *join(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "join(batch, name, shape, dtype) takes 4 arguments");
        return NULL;
    }
    PyObject *batch = args[0], *name = args[1], *shape = args[2];
    if (check_batch(batch) < 0) return NULL;
    if (!PyTuple_CheckExact(shape)) {
        PyErr_SetString(PyExc_TypeError, "shape must be a tuple");
        return NULL;
    }
    if (!PyArray_DescrCheck(args[3])) {
        PyErr_SetString(PyExc_TypeError, "dtype must be a numpy dtype");
        return NULL;
    }
    PyArray_Descr *dtype = (PyArray_Descr *)args[3];
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (ndim + 1 > NPY_MAXDIMS) Py_RETURN_NONE;
    npy_intp dims[NPY_MAXDIMS];
    Py_ssize_t n = PyList_GET_SIZE(batch);
    dims[0] = n;
    for (Py_ssize_t k = 0; k < ndim; k++) {
        dims[k + 1] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
        if (dims[k + 1] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_INCREF(dtype); /* PyArray_Empty steals it */
    PyArrayObject *out = (PyArrayObject *)PyArray_Empty((int)ndim + 1, dims, dtype, 0);
    if (out == NULL) return NULL;
    size_t row_bytes = n > 0 ? (size_t)PyArray_NBYTES(out) / (size_t)n : 0;
    char *dst = PyArray_BYTES(out);
    for (Py_ssize_t i = 0; i < n; i++) { /* checked and copied in one pass; a misfit drops the array */
        PyArrayObject *sample = fitting_sample((Parking *)PyList_GET_ITEM(batch, i), name, dtype, (int)ndim, dims + 1);
        if (sample == NULL) {
            Py_DECREF(out);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        memcpy(dst + (size_t)i * row_bytes, PyArray_BYTES(sample), row_bytes);
    }
    return (PyObject *)out;
}

static PyObject *hand_out(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hand_out(batch, name, values, ready) takes 4 arguments");
        return NULL;
    }
    PyObject *batch = args[0], *name = args[1], *values = args[2], *ready = args[3];
    if (check_batch(batch) < 0) return NULL;
    if (!PyList_CheckExact(ready)) {
        PyErr_SetString(PyExc_TypeError, "ready must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(batch);
    Py_ssize_t rows = PyObject_Length(values);
    if (rows < 0) return NULL;
    if (rows != n) {
        PyErr_Format(PyExc_ValueError, "the task answered %zd rows of %R for a batch of %zd", rows, name, n);
        return NULL;
    }
    double parked = 0.0;
    for (Py_ssize_t i = n - 1; i >= 0; i--) { /* last row first: ready is popped from its end */
        Parking *request = (Parking *)PyList_GET_ITEM(batch, i);
        parked += request->parked_at;
        PyObject *row = PySequence_GetItem(values, i);
        if (row == NULL) return NULL;
        PyObject *actions = PyDict_New();
        if (actions == NULL || PyDict_SetItem(actions, name, row) < 0) {
            Py_XDECREF(actions);
            Py_DECREF(row);
            return NULL;
        }
        Py_DECREF(row);
        PyObject *next_states = PyDict_New();
        PyObject *pair = next_states == NULL ? NULL : PyTuple_Pack(2, actions, next_states);
        Py_DECREF(actions);
        Py_XDECREF(next_states);
        if (pair == NULL) return NULL;
        PyObject *entry = PyTuple_Pack(2, (PyObject *)request, pair);
        Py_DECREF(pair);
        if (entry == NULL) return NULL;
        int failed = PyList_Append(ready, entry);
        Py_DECREF(entry);
        if (failed) return NULL;
    }
    return PyFloat_FromDouble(parked);
}

static PyObject *resumed_sum(PyObject *module, PyObject *batch) {
    if (check_batch(batch) < 0) return NULL;
    double total = 0.0;
    Py_ssize_t n = PyList_GET_SIZE(batch);
    for (Py_ssize_t i = 0; i < n; i++) total += ((Parking *)PyList_GET_ITEM(batch, i))->resumed_at;
    return PyFloat_FromDouble(total);
}

static PyMethodDef module_methods[] = {
    {"join", (PyCFunction)(void (*)(void))join, METH_FASTCALL,
     "join(batch, name, shape, dtype)\n--\n\n"
     "The parked samples of `batch` as one fresh [n, *shape] array, or None when any request has states, "
     "another input than `name`, or a sample that is not an exact C-contiguous ndarray of `dtype` and `shape`."},
    {"hand_out", (PyCFunction)(void (*)(void))hand_out, METH_FASTCALL,
     "hand_out(batch, name, values, ready)\n--\n\n"
     "Append (request, ({name: values[i]}, {})) to `ready` for every request of `batch`, last first; "
     "returns the sum of their park times. ValueError when `values` has another number of rows."},
    {"resumed_sum", (PyCFunction)resumed_sum, METH_O,
     "resumed_sum(batch)\n--\n\nThe sum of the resume times of the requests of `batch`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "parl.runtime.cooperative._cooperative",
    "The cooperative scheduler's hot path in C (the Python twins are in parl/runtime/cooperative/batching.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__cooperative(void) {
    import_array();
    PyObject *greenlet = PyImport_ImportModule("greenlet");
    if (greenlet == NULL) return NULL;
    getcurrent = PyObject_GetAttrString(greenlet, "getcurrent");
    Py_DECREF(greenlet);
    if (getcurrent == NULL) return NULL;
    PyObject *time = PyImport_ImportModule("time");
    if (time == NULL) return NULL;
    perf_counter = PyObject_GetAttrString(time, "perf_counter");
    Py_DECREF(time);
    if (perf_counter == NULL) return NULL;
    switch_name = PyUnicode_InternFromString("switch");
    outside_error_name = PyUnicode_InternFromString("_outside_error");
    if (switch_name == NULL || outside_error_name == NULL) return NULL;
    if (PyType_Ready(&ParkingType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Parking", (PyObject *)&ParkingType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
