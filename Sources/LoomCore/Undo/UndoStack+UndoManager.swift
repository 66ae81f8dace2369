#if canImport(Darwin)
public import Foundation

extension UndoStack {
    /// Shows this stack's steps in a Foundation `UndoManager`, so that AppKit's and UIKit's Undo
    /// and Redo menu items, shortcuts and shake gestures undo the context: each step Loom records
    /// from then on registers one action there, named after the step, whose undo calls
    /// ``ManagedObjectContext/undo()`` and whose redo calls ``ManagedObjectContext/redo()``.
    ///
    /// ```swift
    /// context.undoManager = UndoStack()
    /// context.undoManager?.mirror(into: window.undoManager!)
    /// ```
    ///
    /// Loom's stack stays the one that records: the `UndoManager` only replays it. Call it on the
    /// main actor, for a stack of the view context (or of another main-actor context).
    @MainActor
    public func mirror(into manager: UndoManager) {
        onStepRecorded = { [weak self, weak manager] name in
            guard let self, let manager else { return }
            MainActor.assumeIsolated { self.registerUndo(named: name, in: manager) }
        }
    }

    @MainActor
    private func registerUndo(named name: String, in manager: UndoManager) {
        manager.registerUndo(withTarget: self) { stack in
            MainActor.assumeIsolated {
                stack.context?.undo()
                stack.registerRedo(named: name, in: manager)
            }
        }
        if !name.isEmpty { manager.setActionName(name) }
    }

    @MainActor
    private func registerRedo(named name: String, in manager: UndoManager) {
        manager.registerUndo(withTarget: self) { stack in
            MainActor.assumeIsolated {
                stack.context?.redo()
                stack.registerUndo(named: name, in: manager)
            }
        }
        if !name.isEmpty { manager.setActionName(name) }
    }
}
#endif
