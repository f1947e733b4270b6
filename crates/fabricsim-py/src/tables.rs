//! A run's tables as Python takes them: a buffer per column, not an object
//! per value. A time series of a million rows crossed as JSON once held
//! each row five times over (the core's columns, a JSON tree, its text,
//! Python's objects, the frame): 1.04 KB a row at the peak, now 161 B
//! (docs/PERFORMANCE.md).

use fabricsim_core::metrics::{Coded, Column, Table};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// `{table: {column: data}}`, each column's data as `fabricsim.results`
/// reads it: integers as the bytes of little-endian u64s; floats as those
/// of f64s, a missing or non-finite value as NaN (JSON's null, which it
/// was); texts as `(distinct strings, bytes of a little-endian u32 code
/// per row)`.
pub fn to_py<'py>(py: Python<'py>, tables: &[(&str, &Table)]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for &(name, table) in tables {
        let columns = PyDict::new(py);
        for (column, data) in &table.columns {
            columns.set_item(column, column_to_py(py, data)?)?;
        }
        out.set_item(name, columns)?;
    }
    Ok(out)
}

fn column_to_py<'py>(py: Python<'py>, column: &Column) -> PyResult<Bound<'py, PyAny>> {
    Ok(match column {
        Column::Int(values) => le_words(py, values.iter().map(|v| v.to_le_bytes()))?.into_any(),
        Column::Float(values) => {
            let finite = values.iter().map(|v| v.filter(|x| x.is_finite()).unwrap_or(f64::NAN).to_le_bytes());
            le_words(py, finite)?.into_any()
        }
        Column::Text(values) => {
            let mut coded = Coded::default();
            values.iter().for_each(|v| coded.push(v));
            coded_to_py(py, &coded)?
        }
        Column::Coded(coded) => coded_to_py(py, coded)?,
    })
}

fn coded_to_py<'py>(py: Python<'py>, coded: &Coded) -> PyResult<Bound<'py, PyAny>> {
    let codes = le_words(py, coded.codes.iter().map(|c| c.to_le_bytes()))?;
    Ok((PyList::new(py, &coded.words)?, codes).into_pyobject(py)?.into_any())
}

/// The concatenated `N`-byte words as one `bytes`, written in place.
fn le_words<'py, const N: usize>(
    py: Python<'py>,
    words: impl ExactSizeIterator<Item = [u8; N]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut words = words;
    PyBytes::new_with(py, words.len() * N, |buffer| {
        for chunk in buffer.chunks_exact_mut(N) {
            chunk.copy_from_slice(&words.next().expect("as many words as the length says"));
        }
        Ok(())
    })
}
