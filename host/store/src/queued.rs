//! What the host asks of the queue's rows (`crate::queue` holds the SQL the writer runs for them).

impl crate::Store {
    /// Records task `id` queued, with `spec` (what it will run); returns once that is durable, so
    /// a queued task answered is one the next host finds.
    pub fn queue_task(&self, id: &str, spec: String) {
        self.send(crate::writer::Op::Queue {
            id: id.to_owned(),
            spec,
        });
        self.sync();
    }

    /// Forgets queued task `id`'s row: its work began, or it settled.
    pub fn unqueue(&self, id: &str) {
        self.send(crate::writer::Op::Unqueue { id: id.to_owned() });
    }

    /// Keeps queued task `id` for the next host: this one stops, and the task's record stays
    /// `queued` whatever its settlement here says. Returns once that is durable.
    pub fn park_queued(&self, id: &str) {
        self.send(crate::writer::Op::Park { id: id.to_owned() });
        self.sync();
    }
}
