/* CSV lines from Arrow column buffers in one pass, row by row (lading_jobs.formats.csv).

   The pure-Arrow encoder (csv.py) renders every column into a string array, then joins them
   into lines: the values' text is made, copied into lines, and scanned for quoting, each a pass
   over memory.  This module writes each row's fields straight into the output buffer from the
   columns' own buffers: integers, dates, timestamps (microseconds), decimal128 and booleans are
   rendered here, in the same text as csv.value_text; strings (and any column csv.py rendered to
   text first) are copied, quoted where the dialect needs it.  The caller (csv.CsvEncoder) decides
   per column what is rendered here and guarantees the value ranges it hands over (years
   1..9999, decimal scale >= 0); this file trusts no length: every buffer is checked against
   the rows it must hold before the first byte is read, every string offset against its data,
   and every write against the output's capacity.

   encode(out, rows, delimiter, null, quote, escape, specials, columns) -> bytes written, or -1
   when `out` is too small.  columns: a sequence of tuples
     (kind, mode, validity or None, offset, buf1, buf2 or None, p1, p2, text)
   kind: 0 string (buf1 int32 offsets, buf2 data; p1: also quote the value `\.`),
         1 integer (buf1 values; p1 byte width 1/2/4/8, p2 signed),
         2 date32 (days), 3 timestamp (int64 microseconds; suffix after the digits),
         4 decimal128 (16-byte little-endian two's complement; p1 scale >= 0),
         5 boolean (bits),
         6 float64 (buf1 values): a whole value under 1e10 (not -0.0) written here as its integer and
           ".0", every other valid value (fractions, large ones, -0.0, NaN, infinities) taken in turn
           from the text csv.py rendered of those alone: buf2 its int32 offsets, `text` its data, p1
           how many (text.float_parts classifies them the same way);
   `text`: a timestamp's suffix, a float64 column's rendered values, else empty.
   mode: 0 quote a string value holding a special byte or equal to the null string, 1 never
   quote, 2 quote every non-null value.  A null is the null string, unquoted.  `offset` is the
   array's slice offset (in values and in validity bits). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { K_STR = 0, K_INT = 1, K_DATE = 2, K_TS = 3, K_DEC = 4, K_BOOL = 5, K_FLOAT = 6 };
enum { M_CHECK = 0, M_NEVER = 1, M_FORCE = 2 };

typedef struct {
    int kind, mode;
    int has_validity;
    Py_buffer validity, buf1, buf2, text;
    Py_ssize_t next; /* K_FLOAT: the next of its rendered values */
    int has_buf2;
    int clean; /* a string column whose values hold no special byte (found by memchr over all of them) */
    Py_ssize_t offset;
    long p1, p2;
    const char *suffix; /* text's bytes */
    Py_ssize_t suffix_len;
} column;

static const char DIGITS2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v, written so they end at `end`; returns their start. */
static char *u64_digits(uint64_t v, char *end) {
    char *p = end;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = DIGITS2[i + 1];
        *--p = DIGITS2[i];
    }
    if (v >= 10) {
        unsigned i = (unsigned)v * 2;
        *--p = DIGITS2[i + 1];
        *--p = DIGITS2[i];
    } else {
        *--p = (char)('0' + v);
    }
    return p;
}

static char *u128_digits(unsigned __int128 v, char *end) {
    const uint64_t E19 = 10000000000000000000ULL;
    if ((v >> 64) == 0) return u64_digits((uint64_t)v, end);
    char *p = end;
    while ((v >> 64) != 0) { /* 19 digits at a time below the top */
        uint64_t low = (uint64_t)(v % E19);
        v /= E19;
        char *q = u64_digits(low, p);
        while (q > p - 19) *--q = '0';
        p -= 19;
    }
    return u64_digits((uint64_t)v, p);
}

/* Howard Hinnant's civil_from_days: days since 1970-01-01 -> year, month, day. */
static void civil(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

#define MIN_DAY (-719162)  /* 0001-01-01 */
#define MAX_DAY 2932896    /* 9999-12-31 */

/* YYYY-MM-DD at p (10 bytes); 0 when the day is outside years 1..9999. */
static int write_date(int64_t days, char *p) {
    if (days < MIN_DAY || days > MAX_DAY) return 0;
    int64_t y; unsigned m, d;
    civil(days, &y, &m, &d);
    memcpy(p, DIGITS2 + 2 * (y / 100), 2);
    memcpy(p + 2, DIGITS2 + 2 * (y % 100), 2);
    p[4] = '-';
    memcpy(p + 5, DIGITS2 + 2 * m, 2);
    p[7] = '-';
    memcpy(p + 8, DIGITS2 + 2 * d, 2);
    return 1;
}

static int valid_at(const column *c, Py_ssize_t i) {
    if (!c->has_validity) return 1;
    const uint8_t *bits = (const uint8_t *)c->validity.buf;
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static int64_t int_at(const column *c, Py_ssize_t i) {
    const char *b = (const char *)c->buf1.buf;
    switch (c->p1) {
    case 1: return c->p2 ? (int64_t)((const int8_t *)b)[i] : (int64_t)((const uint8_t *)b)[i];
    case 2: return c->p2 ? (int64_t)((const int16_t *)b)[i] : (int64_t)((const uint16_t *)b)[i];
    case 4: return c->p2 ? (int64_t)((const int32_t *)b)[i] : (int64_t)((const uint32_t *)b)[i];
    default: return ((const int64_t *)b)[i];
    }
}

/* The most bytes one value of a fixed-width kind renders to (unquoted). */
static Py_ssize_t fixed_width(const column *c) {
    switch (c->kind) {
    case K_INT: return 20;
    case K_DATE: return 10;
    case K_TS: return 26 + c->suffix_len;
    case K_DEC: return 42;
    case K_BOOL: return 5;
    default: return 0;
    }
}

typedef struct {
    char *out;
    Py_ssize_t pos, cap;
    const uint8_t *special; /* 256 flags */
    const char *null;
    Py_ssize_t null_len;
    char quote, escape;
} writer;

/* Renders value i of a fixed-width column at w->out + w->pos; returns bytes or -2 (bad value). */
static Py_ssize_t render_fixed(const column *c, Py_ssize_t i, char *p) {
    char tmp[48];
    switch (c->kind) {
    case K_INT: {
        int64_t v = int_at(c, i);
        char *end = tmp + sizeof tmp, *s;
        if (c->p1 == 8 && !c->p2) s = u64_digits((uint64_t)v, end);
        else if (v < 0) { s = u64_digits(0 - (uint64_t)v, end); *--s = '-'; }
        else s = u64_digits((uint64_t)v, end);
        memcpy(p, s, (size_t)(end - s));
        return end - s;
    }
    case K_DATE:
        return write_date(((const int32_t *)c->buf1.buf)[i], p) ? 10 : -2;
    case K_TS: {
        int64_t us = ((const int64_t *)c->buf1.buf)[i];
        const int64_t per_day = 86400000000LL;
        int64_t days = us / per_day, rest = us % per_day;
        if (rest < 0) { rest += per_day; days -= 1; }
        if (!write_date(days, p)) return -2;
        int64_t secs = rest / 1000000, micros = rest % 1000000;
        p[10] = ' ';
        memcpy(p + 11, DIGITS2 + 2 * (secs / 3600), 2);
        p[13] = ':';
        memcpy(p + 14, DIGITS2 + 2 * (secs / 60 % 60), 2);
        p[16] = ':';
        memcpy(p + 17, DIGITS2 + 2 * (secs % 60), 2);
        p[19] = '.';
        memcpy(p + 20, DIGITS2 + 2 * (micros / 10000), 2);
        memcpy(p + 22, DIGITS2 + 2 * (micros / 100 % 100), 2);
        memcpy(p + 24, DIGITS2 + 2 * (micros % 100), 2);
        if (c->suffix_len) memcpy(p + 26, c->suffix, (size_t)c->suffix_len);
        return 26 + c->suffix_len;
    }
    case K_DEC: {
        const uint8_t *b = (const uint8_t *)c->buf1.buf + 16 * i;
        uint64_t lo, hi;
        memcpy(&lo, b, 8);
        memcpy(&hi, b + 8, 8);
        __int128 v = (__int128)(((unsigned __int128)hi << 64) | lo);
        int negative = v < 0;
        unsigned __int128 mag = negative ? (unsigned __int128)0 - (unsigned __int128)v : (unsigned __int128)v;
        char *end = tmp + sizeof tmp;
        char *s = u128_digits(mag, end);
        long scale = c->p1;
        while (end - s < scale + 1) *--s = '0'; /* at least one digit before the point */
        Py_ssize_t n = 0;
        if (negative) p[n++] = '-';
        Py_ssize_t whole = (end - s) - scale;
        memcpy(p + n, s, (size_t)whole);
        n += whole;
        if (scale) {
            p[n++] = '.';
            memcpy(p + n, s + whole, (size_t)scale);
            n += scale;
        }
        return n;
    }
    case K_BOOL: {
        const uint8_t *bits = (const uint8_t *)c->buf1.buf;
        if ((bits[i >> 3] >> (i & 7)) & 1) { memcpy(p, "true", 4); return 4; }
        memcpy(p, "false", 5);
        return 5;
    }
    }
    return -2;
}

static int needs_quote(const writer *w, const column *c, const uint8_t *s, Py_ssize_t n) {
    if (c->mode == M_FORCE) return 1;
    if (c->mode == M_NEVER) return 0;
    if (n == w->null_len && memcmp(s, w->null, (size_t)n) == 0) return 1;
    if (c->p1 && n == 2 && s[0] == '\\' && s[1] == '.') return 1;
    if (c->clean) return 0;
    const uint8_t *special = w->special;
    for (Py_ssize_t k = 0; k < n; k++)
        if (special[s[k]]) return 1;
    return 0;
}

/* One field of row r; 0 on success, -1 when the output is full, -2 on a bad value, -3 when a
   float64 column's rendered values run out. */
static int write_field(writer *w, column *c, Py_ssize_t r) {
    Py_ssize_t i = c->offset + r;
    if (!valid_at(c, i)) {
        if (w->cap - w->pos < w->null_len) return -1;
        memcpy(w->out + w->pos, w->null, (size_t)w->null_len);
        w->pos += w->null_len;
        return 0;
    }
    if (c->kind == K_STR) {
        const int32_t *offsets = (const int32_t *)c->buf1.buf;
        int32_t start = offsets[i], stop = offsets[i + 1];
        const uint8_t *s = (const uint8_t *)c->buf2.buf + start;
        Py_ssize_t n = stop - start;
        if (!needs_quote(w, c, s, n)) {
            if (w->cap - w->pos < n) return -1;
            memcpy(w->out + w->pos, s, (size_t)n);
            w->pos += n;
            return 0;
        }
        if (w->cap - w->pos < 2 * n + 2) return -1;
        char *p = w->out + w->pos;
        *p++ = w->quote;
        const char q = w->quote, e = w->escape;
        for (Py_ssize_t k = 0; k < n; k++) {
            char ch = (char)s[k];
            if (ch == q || ch == e) *p++ = e;
            *p++ = ch;
        }
        *p++ = q;
        w->pos = p - w->out;
        return 0;
    }
    if (c->kind == K_FLOAT) {
        double x = ((const double *)c->buf1.buf)[i];
        int quoted = c->mode == M_FORCE;
        if (isfinite(x) && x == floor(x) && fabs(x) < 1e10 && !(x == 0 && signbit(x))) {
            char tmp[24], *end = tmp + sizeof tmp - 2, *s;
            int64_t v = (int64_t)x;
            s = v < 0 ? u64_digits(0 - (uint64_t)v, end) : u64_digits((uint64_t)v, end);
            if (v < 0) *--s = '-';
            end[0] = '.';
            end[1] = '0';
            end += 2;
            Py_ssize_t n = end - s;
            if (w->cap - w->pos < n + 2) return -1;
            char *p = w->out + w->pos;
            if (quoted) *p++ = w->quote;
            memcpy(p, s, (size_t)n);
            p += n;
            if (quoted) *p++ = w->quote;
            w->pos = p - w->out;
            return 0;
        }
        if (c->next >= c->p1) return -3;
        const int32_t *offsets = (const int32_t *)c->buf2.buf;
        int32_t start = offsets[c->next], stop = offsets[c->next + 1];
        c->next++;
        Py_ssize_t n = stop - start;
        if (w->cap - w->pos < n + 2) return -1;
        char *p = w->out + w->pos;
        if (quoted) *p++ = w->quote;
        memcpy(p, c->suffix + start, (size_t)n);
        p += n;
        if (quoted) *p++ = w->quote;
        w->pos = p - w->out;
        return 0;
    }
    Py_ssize_t need = fixed_width(c) + 2;
    if (w->cap - w->pos < need) return -1;
    int quoted = c->mode == M_FORCE;
    char *p = w->out + w->pos;
    if (quoted) *p++ = w->quote;
    Py_ssize_t n = render_fixed(c, i, p);
    if (n < 0) return (int)n;
    p += n;
    if (quoted) *p++ = w->quote;
    w->pos = p - w->out;
    return 0;
}

static void release(column *cols, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n; k++) {
        if (cols[k].has_validity) PyBuffer_Release(&cols[k].validity);
        PyBuffer_Release(&cols[k].buf1);
        if (cols[k].has_buf2) PyBuffer_Release(&cols[k].buf2);
        PyBuffer_Release(&cols[k].text);
    }
}

/* Parses and checks column k against `rows`; 0 on success (buffers held), -1 with an exception. */
static int parse_column(PyObject *spec, Py_ssize_t rows, column *c) {
    PyObject *validity, *buf1, *buf2;
    memset(c, 0, sizeof *c);
    if (!PyArg_ParseTuple(spec, "iiOnOOlly*", &c->kind, &c->mode, &validity, &c->offset, &buf1, &buf2,
                          &c->p1, &c->p2, &c->text))
        return -1;
    c->suffix = (const char *)c->text.buf;
    c->suffix_len = c->text.len;
    if (c->kind < K_STR || c->kind > K_FLOAT || c->mode < M_CHECK || c->mode > M_FORCE || c->offset < 0
        || c->offset > PY_SSIZE_T_MAX / 16 - rows - 1) {
        PyErr_SetString(PyExc_ValueError, "bad column kind, mode or offset");
        goto fail;
    }
    if (c->kind != K_STR && c->mode == M_CHECK) {
        PyErr_SetString(PyExc_ValueError, "only string columns are checked for quoting");
        goto fail;
    }
    if (c->kind == K_INT && c->p1 != 1 && c->p1 != 2 && c->p1 != 4 && c->p1 != 8) {
        PyErr_SetString(PyExc_ValueError, "integer width must be 1, 2, 4 or 8 bytes");
        goto fail;
    }
    if (c->kind == K_DEC && (c->p1 < 0 || c->p1 > 38)) {
        PyErr_SetString(PyExc_ValueError, "decimal scale must be 0..38");
        goto fail;
    }
    if (c->kind == K_TS && c->suffix_len > 8) {
        PyErr_SetString(PyExc_ValueError, "timestamp suffix longer than 8 bytes");
        goto fail;
    }
    Py_ssize_t end = c->offset + rows; /* one past the last value */
    if (c->kind == K_FLOAT && (c->p1 < 0 || c->p1 > rows)) {
        PyErr_SetString(PyExc_ValueError, "a float column's rendered values outnumber its rows");
        goto fail;
    }
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0) goto fail;
        c->has_validity = 1;
    }
    if (PyObject_GetBuffer(buf1, &c->buf1, PyBUF_SIMPLE) < 0) goto fail;
    if (buf2 != Py_None) {
        if (PyObject_GetBuffer(buf2, &c->buf2, PyBUF_SIMPLE) < 0) goto fail;
        c->has_buf2 = 1;
    }
    if (c->has_validity && c->validity.len < (end + 7) / 8) goto short_buffer;
    Py_ssize_t width = c->kind == K_STR ? 4 : c->kind == K_INT ? c->p1 : c->kind == K_DATE ? 4
                     : c->kind == K_TS || c->kind == K_FLOAT ? 8 : c->kind == K_DEC ? 16 : 0;
    if (c->kind == K_BOOL ? c->buf1.len < (end + 7) / 8
                          : c->buf1.len / width < end + (c->kind == K_STR)) goto short_buffer;
    if (c->kind == K_STR) {
        if (!c->has_buf2) goto short_buffer;
        const int32_t *offsets = (const int32_t *)c->buf1.buf;
        int32_t prev = offsets[c->offset];
        if (prev < 0) goto bad_offsets;
        for (Py_ssize_t i = c->offset + 1; i <= end; i++) {
            if (offsets[i] < prev) goto bad_offsets;
            prev = offsets[i];
        }
        if (prev > c->buf2.len) goto bad_offsets;
    }
    if (c->kind == K_FLOAT) { /* the rendered values: p1 + 1 int32 offsets into text */
        if (!c->has_buf2 || c->buf2.len / 4 < c->p1 + 1) goto short_buffer;
        const int32_t *offsets = (const int32_t *)c->buf2.buf;
        int32_t prev = offsets[0];
        if (prev < 0) goto bad_offsets;
        for (Py_ssize_t i = 1; i <= c->p1; i++) {
            if (offsets[i] < prev) goto bad_offsets;
            prev = offsets[i];
        }
        if (prev > c->text.len) goto bad_offsets;
    }
    return 0;
short_buffer:
    PyErr_SetString(PyExc_ValueError, "a column buffer is shorter than its rows");
    goto fail;
bad_offsets:
    PyErr_SetString(PyExc_ValueError, "string offsets out of order or beyond their data");
fail:
    if (c->has_validity) PyBuffer_Release(&c->validity);
    if (c->buf1.obj) PyBuffer_Release(&c->buf1);
    if (c->has_buf2) PyBuffer_Release(&c->buf2);
    if (c->text.obj) PyBuffer_Release(&c->text);
    c->has_validity = c->has_buf2 = 0;
    return -1;
}

static PyObject *encode(PyObject *self, PyObject *args) {
    Py_buffer out, null, specials;
    Py_ssize_t rows;
    int delimiter, quote, escape;
    PyObject *columns;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*niy*iiy*O", &out, &rows, &delimiter, &null, &quote, &escape, &specials,
                          &columns))
        return NULL;
    PyObject *seq = NULL, *result = NULL;
    column *cols = NULL;
    Py_ssize_t parsed = 0;
    if (rows < 0 || delimiter < 0 || delimiter > 255 || quote < 0 || quote > 255 || escape < 0 || escape > 255) {
        PyErr_SetString(PyExc_ValueError, "bad rows, delimiter, quote or escape");
        goto done;
    }
    seq = PySequence_Fast(columns, "columns must be a sequence");
    if (!seq) goto done;
    Py_ssize_t ncols = PySequence_Fast_GET_SIZE(seq);
    if (ncols == 0) {
        PyErr_SetString(PyExc_ValueError, "no columns");
        goto done;
    }
    cols = PyMem_Calloc((size_t)ncols, sizeof *cols);
    if (!cols) { PyErr_NoMemory(); goto done; }
    for (; parsed < ncols; parsed++)
        if (parse_column(PySequence_Fast_GET_ITEM(seq, parsed), rows, &cols[parsed]) < 0) goto done;
    uint8_t special[256] = {0};
    for (Py_ssize_t k = 0; k < specials.len; k++) special[((const uint8_t *)specials.buf)[k]] = 1;
    writer w = {out.buf, 0, out.len, special, null.buf, null.len, (char)quote, (char)escape};
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < ncols; k++) { /* most text columns hold no special byte at all */
        column *c = &cols[k];
        if (c->kind != K_STR || c->mode != M_CHECK) continue;
        const int32_t *offsets = (const int32_t *)c->buf1.buf;
        const char *from = (const char *)c->buf2.buf + offsets[c->offset];
        size_t span = (size_t)(offsets[c->offset + rows] - offsets[c->offset]);
        c->clean = 1;
        for (Py_ssize_t b = 0; b < specials.len && c->clean; b++)
            if (memchr(from, ((const uint8_t *)specials.buf)[b], span)) c->clean = 0;
    }
    for (Py_ssize_t r = 0; r < rows && status == 0; r++) {
        for (Py_ssize_t k = 0; k < ncols; k++) {
            if (k) {
                if (w.pos >= w.cap) { status = -1; break; }
                w.out[w.pos++] = (char)delimiter;
            }
            status = write_field(&w, &cols[k], r);
            if (status) break;
        }
        if (status == 0) {
            if (w.pos >= w.cap) status = -1;
            else w.out[w.pos++] = '\n';
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < ncols && status == 0; k++)
        if (cols[k].kind == K_FLOAT && cols[k].next != cols[k].p1) status = -3;
    if (status == -2) PyErr_SetString(PyExc_ValueError, "a date or timestamp outside years 1..9999");
    else if (status == -3) PyErr_SetString(PyExc_ValueError, "a float column's rendered values do not match its values");
    else result = PyLong_FromSsize_t(status == -1 ? -1 : w.pos);
done:
    if (cols) { release(cols, parsed); PyMem_Free(cols); }
    Py_XDECREF(seq);
    PyBuffer_Release(&out);
    PyBuffer_Release(&null);
    PyBuffer_Release(&specials);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode(out, rows, delimiter, null, quote, escape, specials, columns) -> bytes written, or -1 "
     "when out is too small (see the module's source for the column tuples)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csvlines",
                                    "CSV lines from Arrow column buffers in one pass (lading_jobs.formats.csv).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__csvlines(void) { return PyModule_Create(&module); }
