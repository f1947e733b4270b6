//! Typed ids of the things a simulation keeps in arenas (QPs, flows, jobs,
//! their phases and collectives, messages, collective transfers), and the
//! arena they index. An id is a `u32` position; its type says what it
//! indexes, so a flow id can never be used to look up a QP.

use std::marker::PhantomData;

/// A typed index into an `Arena`.
pub trait Id: Copy {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl Id for $name {
            #[inline(always)]
            fn new(index: usize) -> Self {
                $name(index as u32)
            }
            #[inline(always)]
            fn index(self) -> usize {
                self.0 as usize
            }
        }
    )*};
}

ids! {
    /// A queue pair: a requester at one NIC and its responder at another.
    QpId;
    /// A flow of the scenario's traffic.
    FlowId;
    /// A job of the scenario's `jobs`.
    JobId;
    /// One phase of a job in one iteration.
    PhaseId;
    /// One collective run by one group of a job's ranks in one phase.
    CollectiveId;
    /// One posted RDMA write, striped over the QPs of a connection.
    MessageId;
    /// One transfer of a collective between two ranks.
    TransferId;
    /// The QPs between two NICs that one flow or one channel uses.
    ConnectionId;
}

/// Consecutive ids `start..end`: what one job's phases or one collective's
/// transfers are, as they are pushed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRange<I> {
    pub start: I,
    pub end: I,
}

impl<I: Id> IdRange<I> {
    pub fn len(self) -> usize {
        self.end.index() - self.start.index()
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    pub fn iter(self) -> impl Iterator<Item = I> {
        (self.start.index()..self.end.index()).map(I::new)
    }

    /// Position of `id` in the range.
    pub fn offset(self, id: I) -> usize {
        id.index() - self.start.index()
    }
}

/// A vector indexed by one kind of id.
#[derive(Clone, Debug)]
pub struct Arena<I, T> {
    items: Vec<T>,
    _id: PhantomData<I>,
}

impl<I, T> Default for Arena<I, T> {
    fn default() -> Self {
        Arena { items: Vec::new(), _id: PhantomData }
    }
}

impl<I: Id, T> Arena<I, T> {
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::new(self.items.len() - 1)
    }

    /// The id the next `push` returns.
    pub fn next_id(&self) -> I {
        I::new(self.items.len())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The item of `id`, if there is one.
    #[inline(always)]
    pub fn get(&self, id: I) -> Option<&T> {
        self.items.get(id.index())
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Every id with its item, in order.
    pub fn enumerate(&self) -> impl Iterator<Item = (I, &T)> {
        self.items.iter().enumerate().map(|(i, item)| (I::new(i), item))
    }

    pub fn ids(&self) -> impl Iterator<Item = I> {
        (0..self.items.len()).map(I::new)
    }
}

impl<I: Id, T> From<Vec<T>> for Arena<I, T> {
    fn from(items: Vec<T>) -> Self {
        Arena { items, _id: PhantomData }
    }
}

impl<I: Id, T> FromIterator<T> for Arena<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(items: It) -> Self {
        Arena { items: items.into_iter().collect(), _id: PhantomData }
    }
}

impl<I: Id, T> std::ops::Index<I> for Arena<I, T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: Id, T> std::ops::IndexMut<I> for Arena<I, T> {
    #[inline(always)]
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}

/// The items of consecutive ids.
impl<I: Id, T> std::ops::Index<IdRange<I>> for Arena<I, T> {
    type Output = [T];
    fn index(&self, range: IdRange<I>) -> &[T] {
        &self.items[range.start.index()..range.end.index()]
    }
}

impl<'a, I, T> IntoIterator for &'a Arena<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
